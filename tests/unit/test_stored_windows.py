"""Windows decided before win2-seq-v1 existed decide exactly as they did.

tests/fixtures/windows holds three small windows (an in-process simulator, two repeats) made and decided by
fairwin at commit 3720bda, under win2-v1, win2-launch-v1 and win2-alt7-v1: their sealed files as written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fairwin.window.stored import decide_window_dir

STORED = Path(__file__).resolve().parents[1] / "fixtures" / "windows"


@pytest.mark.parametrize("rule", ["win2-v1", "win2-launch-v1", "win2-alt7-v1"])
def test_a_window_decided_before_decides_as_it_did(rule: str) -> None:
    found = decide_window_dir(STORED / rule)
    (decision,) = found.decisions
    assert decision.rule_id == rule and decision.sequential is None
    assert found.notes == [f"recomputed: identical to the recorded decision ({decision.verdict})"]
