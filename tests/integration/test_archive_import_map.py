"""A team's own control archive imported through a map, then deciding a window's first look (real `fairwin sim`)."""

from __future__ import annotations

import datetime
import json
import os
import random
import socket
from pathlib import Path

import pytest

from fairwin.files import scan_jsonl
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import fairwin, only_window

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

MAP = """\
[control]
field = "start_role"
equals = ["OFF"]

[fields]
window_id = "window"
time = "finished_at"
start = "start_index"
cell = "cell"
commit = "h_commit"
max_tokens = "max_tokens"
clock_cap_mhz = "gpu.clock_cap_mhz"

[values]
mode = "controlled"
role = "A"
prompt_tokens = 64
concurrency = 1
temperature = 1.0
hosts = [{host}]

[repeats]
field = "repeats"
number = "r"

[repeats.metrics]
pooled_rate_tps = "rate_tps"
accepted_per_round = "accepted_per_round"
decode_tps = "decode_tps"
ms_per_round = "ms_per_round"
ttft_s = "ttft_s"
"""


def runbook_archive(path: Path) -> Path:
    """40 rows as a runbook's control-archive.jsonl keeps them: 10 windows x 2 cells x an OFF and an ON start,
    each with its clock cap, commit, max_tokens and three repeats."""
    rng = random.Random(7)
    lines = []
    for window in range(10):
        for cell in ("short-b1", "long-b4"):
            for index, role in ((1, "OFF"), (2, "ON")):
                level = 1.0 + rng.gauss(0, 0.01)
                repeats = [
                    {
                        "r": r,
                        "rate_tps": round(480 * level * (1 + rng.gauss(0, 0.005)), 2),
                        "accepted_per_round": 1.0,
                        "decode_tps": round(490 * level * (1 + rng.gauss(0, 0.005)), 2),
                        "ms_per_round": round(2.05 / level, 4),
                        "ttft_s": 0.01,
                    }
                    for r in (1, 2, 3)
                ]
                lines.append(
                    {
                        "window": f"2026-11-{window + 1:02d}-hold",
                        "finished_at": f"2026-11-{window + 1:02d}T03:{index:02d}:00",
                        "start_index": index,
                        "start_role": role,
                        "cell": cell,
                        "h_commit": "9f1c2ab",
                        "max_tokens": 48 if cell == "short-b1" else 512,
                        "gpu": {"clock_cap_mhz": 2300},
                        "repeats": repeats,
                    }
                )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def archive_rows(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return scan_jsonl(path)[0] if path.exists() else []


@pytest.mark.slow
def test_a_runbook_archive_imports_through_a_map_and_feeds_the_default_rules_first_look_on_gpus(
    make_plan: PlanFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    theirs = runbook_archive(tmp_path / "control-archive.jsonl")
    mapping = tmp_path / "map.toml"
    mapping.write_text(MAP.format(host=json.dumps(socket.gethostname())))
    ours = tmp_path / "windows" / "control-archive.jsonl"
    done = fairwin("archive", "import", str(theirs), "--map", str(mapping), "--archive", str(ours))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"imported 20 control starts of 10 windows into {ours} (mapped by {mapping}; 20 rows not control starts)"
    )
    rows = archive_rows(ours)
    assert len(rows) == 20 and {r["cell"] for r in rows} == {"short-b1", "long-b4"}
    first = next(r for r in rows if r["cell"] == "short-b1")
    assert (first["start"], first["role"], first["mode"], first["commit"]) == ("s1", "A", "controlled", "9f1c2ab")
    assert first["clock_cap_mhz"] == 2300 and first["clock_caps_mhz"] == {socket.gethostname(): 2300}
    assert first["time"] == datetime.datetime(2026, 11, 1, 3, 1, tzinfo=datetime.UTC).timestamp()  # naive: UTC
    assert [r["repeat"] for r in first["repeats"]] == [1, 2, 3]
    # A window of the runbook's kind under the default rule: a GPU source on the host (the stand-in nvidia-smi, whose
    # model the imported rows never name), caps read from the servers' `clock cap`-style lines, production's cap
    # from the host's environment file. It matches the imported starts and decides at its look after 3.
    monkeypatch.setenv("PATH", f"{FIXTURES}:{os.environ['PATH']}")
    role = sim_role("--ms-per-round", "2", model="cap-2300", env={"FAKE_GPU_CAP": "2300"})
    plan = make_plan(
        roles={"A": role, "B": {**role, "argv": [*role["argv"], "--spec-tokens", "4", "--acceptance", "0.8,0.6"]}},
        window={"rule": None, "repeats": 3, "archive": str(ours)},
    )
    (plan.parent / "gpu.env").write_text("GPU_CLOCK_CAP=2300\n")
    caps_from_log = (
        "[telemetry]\ninterval_s = 0.2\ncap_from = \"log\"\ncap_log_pattern = 'serving cap-(\\d+) on'\n"
        'production_cap_file = "gpu.env"\n'
    )
    plan.write_text(plan.read_text() + "\n" + caps_from_log)
    ran = fairwin("run", str(plan), "--mode", "controlled")
    assert ran.returncode == 0, ran.stderr
    assert "GPU telemetry: nvidia-smi" in ran.stderr
    assert "to the first look (after 3 starts)" in ran.stderr  # the gate's promise, kept below
    window = only_window(plan)
    looks = [e for e in scan_jsonl(window / "journal.jsonl")[0] if e["step"] == "look after s3" and e["event"] == "end"]
    assert looks and looks[0].get("taken", True) is not False, looks
    decision = json.loads((window / "decision.json").read_text())
    assert decision["sequential"]["looks"][0]["after"] == 3 and decision["sequential"]["starts_used"] == 3
    archive = decision["cells"][0]["noise"]["archive"]
    assert archive["starts"] == 10 and archive["windows"] == 10 and archive["launch_cv_pct"] is not None
    summary = (window / "summary.md").read_text()
    assert f"archive day-to-day spread {archive['launch_cv_pct']:.2f} % over 10 control starts in 10 windows" in summary
    # The window's own control starts are archived at the cap their logs said, on the host they ran on.
    own = [r for r in archive_rows(ours) if r["window_id"] == window.name]
    assert own and {json.dumps(r["clock_caps_mhz"]) for r in own} == {json.dumps({socket.gethostname(): 2300.0})}
    assert {r["clock_cap_mhz"] for r in own} == {2300.0} and {r["gpu_model"] for r in own} != {None}


def test_a_row_that_does_not_map_is_named_and_nothing_is_imported(tmp_path: Path) -> None:
    theirs = runbook_archive(tmp_path / "control-archive.jsonl")
    lines = theirs.read_text().splitlines()
    broken = json.loads(lines[4])
    del broken["gpu"]
    lines[4] = json.dumps(broken)
    theirs.write_text("\n".join(lines) + "\n")
    mapping = tmp_path / "map.toml"
    mapping.write_text(MAP.format(host='"here"'))
    ours = tmp_path / "ours.jsonl"
    done = fairwin("archive", "import", str(theirs), "--map", str(mapping), "--archive", str(ours))
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"fairwin: error: 1 row(s) do not map, nothing imported: {theirs}:5: clock_cap_mhz <- 'gpu.clock_cap_mhz': "
        "the row has no such field"
    )
    assert archive_rows(ours) == []
    mapping.write_text(MAP.format(host='"here"').replace('cell = "cell"\n', ""))
    refused = fairwin("archive", "import", str(theirs), "--map", str(mapping), "--archive", str(ours))
    assert refused.returncode == 2
    assert "no [fields] or [values] entry for ['cell']: every archived start needs them" in refused.stderr
