"""Windows decided under earlier rules decide exactly as they did.

tests/fixtures/windows holds small windows and their sealed files as written: three (an in-process simulator,
two repeats) made and decided by fairwin at commit 3720bda, under win2-v1, win2-launch-v1 and win2-alt7-v1, and
one made at commit 90fe7db under win2-seq-v1, before win2-seq-v2 existed (`fairwin sim` roles 3 and 2.9 ms a
round, two repeats, an archive of 11 control starts from five windows before it): WIN at its first look, after 3.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from fairwin.verdict.recomputed import rounding_difference
from fairwin.verdict.stored import decide_window

STORED = Path(__file__).resolve().parents[1] / "fixtures" / "windows"


@pytest.mark.parametrize("rule", ["win2-v1", "win2-launch-v1", "win2-alt7-v1", "win2-seq-v1"])
def test_a_window_decided_before_decides_as_it_did(rule: str) -> None:
    found = decide_window(STORED / rule)
    (decision,) = found.decisions
    assert decision.rule_id == rule and (decision.sequential is not None) == (rule == "win2-seq-v1")
    (note,) = found.notes  # bit for bit, or (alt7's least squares, on another OpenBLAS) but for the last digits
    exact = f"recomputed: identical to the recorded decision ({decision.verdict})"
    assert note == exact or note.startswith(f"{exact} but for float rounding (largest relative difference "), note


def test_a_recomputation_differing_beyond_rounding_or_in_a_word_differs() -> None:
    record = {"verdict": "WIN", "cells": [{"point_pct": 2.5, "n": 3}]}
    assert rounding_difference(record, record) == 0.0
    nudged = {"verdict": "WIN", "cells": [{"point_pct": 2.5 * (1 + 4e-16), "n": 3}]}
    assert 0.0 < (rounding_difference(record, nudged) or 0.0) < 1e-15
    assert rounding_difference(record, {"verdict": "WIN", "cells": [{"point_pct": 2.5000001, "n": 3}]}) is None
    assert rounding_difference(record, {"verdict": "LOSS", "cells": [{"point_pct": 2.5, "n": 3}]}) is None
    assert rounding_difference(record, {"verdict": "WIN", "cells": []}) is None


def test_a_looks_level_reads_as_it_is_and_a_decision_2_still_compares_with_its_whole_percents() -> None:
    """fairwin.decision/2 rounded an interval's level to a whole percent (win2-seq-v1's guards, at 99.75 %, read
    "(100%)"); /3 states it, and a /2 window's recomputation is compared as /2 worded it."""
    recorded = (STORED / "win2-seq-v1" / "decision.json").read_text()
    assert '"format": "fairwin.decision/2"' in recorded and "(100%); fails when" in recorded
    (decision,) = decide_window(STORED / "win2-seq-v1").decisions
    assert decision.format == "fairwin.decision/4"
    (cell,) = decision.cells
    judged = [guard.detail for guard in cell.guards if guard.estimate is not None]
    assert judged == ["decode_tps +5.97 % [-1.70, +14.24] (99.75%); fails when the whole interval is below -3 %"]


def test_a_decision_3_compares_with_its_recomputation_without_the_arms_4_added(tmp_path: Path) -> None:
    window = tmp_path / "window"
    shutil.copytree(STORED / "win2-launch-v1", window)
    (now,) = decide_window(window).decisions
    recorded = now.model_dump(mode="json", exclude={"arms"}) | {"format": "fairwin.decision/3"}
    recorded["inputs"] = json.loads((window / "decision.json").read_text())["inputs"]
    (window / "decision.json").write_text(json.dumps(recorded))
    status = json.loads((window / "status.json").read_text())  # the decision's seal, as the window wrote it
    status["decision_sha256"] = hashlib.sha256((window / "decision.json").read_bytes()).hexdigest()
    (window / "status.json").write_text(json.dumps(status))
    assert decide_window(window).notes == [f"recomputed: identical to the recorded decision ({now.verdict})"]
