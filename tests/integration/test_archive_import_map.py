"""A team's own control archive imported through a map, then deciding a window's first look (real `fairwin sim`)."""

from __future__ import annotations

import datetime
import json
import os
import random
import re
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
    rows = archive_rows(ours)
    import_id = rows[0]["imported"]
    assert done.stdout.strip() == (
        f"imported 20 control starts of 10 windows into {ours} as {import_id} (mapped by {mapping}; 20 rows not "
        f"control starts); `fairwin archive drop {import_id}` takes them out"
    )
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
    monkeypatch.setenv("FAKE_GPU_SCOPE", str(tmp_path))  # GPUs of its own: other tests' stand-ins never see these
    # Rounds of 20 ms and the servers at nice 10: a busy machine's run queue cannot make the client's timing
    # untrusted (the guard decode_tps would be unobserved and the look INCONCLUSIVE: not what this test is about).
    role = sim_role(
        "--ms-per-round", "20", model="cap-2300", env={"FAKE_GPU_CAP": "2300", "FAKE_GPU_SCOPE": str(tmp_path)}, nice=10
    )
    plan = make_plan(
        roles={"A": role, "B": {**role, "argv": [*role["argv"], "--spec-tokens", "4", "--acceptance", "0.8,0.6"]}},
        window={"rule": None, "repeats": 3, "archive": str(ours)},
    )
    (plan.parent / "gpu.env").write_text("GPU_CLOCK_CAP=2300\n")
    caps_from_log = (
        "[telemetry]\ninterval_s = 1.0\ncap_from = \"log\"\ncap_log_pattern = 'serving cap-(\\d+) on'\n"
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
    assert decision["verdict"] == "WIN", decision["cells"][0]["reasons"]
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


CSV_MAP = """\
[control]
field = "role"
equals = ["OFF"]

[fields]
window_id = "hold"
time = "unix"
start = "start"
cell = "cell"
max_tokens = "max_tokens"
clock_cap_mhz = "cap"

[values]
mode = "controlled"
role = "A"
temperature = 1.0
{shape}

[repeats.metrics]
pooled_rate_tps = "rate"
accepted_per_round = "acc"
decode_tps = "decode"
"""
SHAPES = {
    "wrong": "prompt_tokens = 64\nconcurrency = 1",  # one shape for two cells of different shapes
    "right": '[cells.short-b1]\nprompt_tokens = 64\nconcurrency = 1\n\n[cells."long-b2"]\nprompt_tokens = 128\n'
    "concurrency = 2",
}


def per_repeat_csv(path: Path) -> Path:
    """A team's archive as a CSV with one row per repeat: 12 holds x 2 cells x (OFF, ON) x 3 repeats, its times
    Unix seconds written as text, every hold at cap 2300."""
    rng = random.Random(11)
    lines = ["hold,unix,start,role,cell,max_tokens,cap,rate,acc,decode"]
    for hold in range(12):
        for cell, tokens in (("short-b1", 48), ("long-b2", 32)):
            for start, role in ((1, "OFF"), (2, "ON")):
                level = 1.0 + rng.gauss(0, 0.01)
                for repeat in range(3):
                    rate = 480 * level * (1 + rng.gauss(0, 0.005))
                    when = 1_762_000_000 + hold * 86_400 + start * 600 + repeat * 60
                    lines.append(f"h{hold},{when},{start},{role},{cell},{tokens},2300,{rate:.2f},1.0,{rate + 9:.2f}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_a_csv_archive_of_one_row_per_repeat_is_imported_as_its_starts_replaced_by_id_and_feeds_the_look_after_3(
    make_plan: PlanFactory, tmp_path: Path
) -> None:
    theirs = per_repeat_csv(tmp_path / "control-archive.csv")
    ours = tmp_path / "windows" / "control-archive.jsonl"
    role = sim_role("--ms-per-round", "20", model="cap-2300", nice=10)  # the client's timing trusted on a busy machine
    plan = make_plan(
        roles={"A": role, "B": {**role, "argv": [*role["argv"], "--spec-tokens", "4", "--acceptance", "0.8,0.6"]}},
        window={"rule": None, "repeats": 3, "archive": str(ours), "production_clock_cap_mhz": 2300},
        cells={
            "short-b1": {"families": ["prose"], "prompt_tokens": 64, "max_tokens": 48, "streams_per_wave": 1},
            "long-b2": {
                "families": ["prose"],
                "prompt_tokens": 128,
                "max_tokens": 32,
                "concurrency": 2,
                "streams_per_wave": 2,
            },
        },
    )
    plan.write_text(
        plan.read_text()
        + '\n[telemetry]\ngpu = "none"\ncap_from = "log"\ncap_log_pattern = \'serving cap-(\\d+) on\'\n'
        + '\n[runtime]\naccept_unobserved = ["clocks", "gpus"]\n'  # no GPU here: unseen, and said so
    )
    wrong, right = tmp_path / "wrong.toml", tmp_path / "right.toml"
    wrong.write_text(CSV_MAP.format(shape=SHAPES["wrong"]))
    right.write_text(CSV_MAP.format(shape=SHAPES["right"]))
    first = fairwin("archive", "import", str(theirs), "--map", str(wrong), "--archive", str(ours))
    assert first.returncode == 0, first.stderr
    assert "warning: [values] prompt_tokens = 64 keys every cell alike (long-b2, short-b1)" in first.stderr
    (import_id,) = re.findall(r" as (imp-\S+) ", first.stdout)
    assert first.stdout.startswith(f"imported 24 control starts of 12 windows into {ours} as {import_id} ")
    stats = fairwin("archive", "stats", "--archive", str(ours), "--plan", str(plan), "--json")
    verdicts = {(g["key"]["cell"], g["plan"]) for g in json.loads(stats.stdout)}
    assert verdicts == {
        ("short-b1", f"counted by {plan} (controlled)"),
        ("long-b2", f"not counted by {plan} (controlled): concurrency 1, not 2; prompt_tokens 64, not 128"),
    }
    again = fairwin(
        "archive", "import", str(theirs), "--map", str(right), "--archive", str(ours), "--replace", import_id
    )
    assert again.returncode == 0, again.stderr
    assert f"replaced import {import_id} (24 rows)" in again.stdout
    rows = archive_rows(ours)
    (new_id,) = {r["imported"] for r in rows if r.get("imported") and r["imported"] != import_id}
    assert fairwin("archive", "imports", "--archive", str(ours)).stdout.startswith(
        f"{new_id}: 24 control starts of 12 windows, cells long-b2, short-b1, "
    )
    used = [r for r in rows if r.get("imported") == new_id]
    assert {(r["cell"], r["prompt_tokens"], r["concurrency"]) for r in used} == {
        ("short-b1", 64, 1),
        ("long-b2", 128, 2),
    }
    assert all([rep["repeat"] for rep in r["repeats"]] == [1, 2, 3] for r in used)  # 3 rows each, one start
    assert all(r["time"] == 1_762_000_000 + int(r["window_id"][1:]) * 86_400 + 600 + 120 for r in used)
    # The gate promises the look after 3 for both cells, and the window takes it.
    ran = fairwin("run", str(plan), "--mode", "controlled")
    assert ran.returncode == 0, ran.stderr
    assert "to the first look (after 3 starts)" in ran.stderr
    decision = json.loads((only_window(plan) / "decision.json").read_text())
    assert decision["sequential"]["looks"][0]["after"] == 3
    assert decision["verdict"] == "WIN", [c["reasons"] for c in decision["cells"]]
    assert {c["cell"]: c["noise"]["archive"]["starts"] for c in decision["cells"]} == {"short-b1": 12, "long-b2": 12}
