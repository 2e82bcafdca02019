"""GPU telemetry through a whole window, from a stand-in nvidia-smi on PATH (tests/fixtures/nvidia-smi) whose
two GPUs follow what runs on them: one start at another clock cap, and dialled back for heat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fairwin.durable import read_jsonl
from fairwin.launch.spec import free_port
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import fairwin, only_window, status

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.slow
def test_a_start_at_another_cap_with_a_thermal_dialback_makes_the_window_inconclusive(
    make_plan: PlanFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{FIXTURES}:{os.environ['PATH']}")
    plan = make_plan(
        roles={
            "A": sim_role("--ms-per-round", "10", model="gpu-a", env={"FAKE_GPU_CAP": "1980"}),
            "B": sim_role(
                "--ms-per-round", "10", model="gpu-b", env={"FAKE_GPU_CAP": "1755", "FAKE_GPU_THERMAL_AFTER_S": "2.5"}
            ),
        },
        window={"repeats": 2, "warmup_waves_max": 1},
    )
    (plan.parent / "gpu.env").write_text("GPU_CLOCK_CAP=1980\n")
    plan.write_text(plan.read_text() + '\n[telemetry]\ninterval_s = 0.2\nproduction_cap_file = "gpu.env"\n')
    done = fairwin("run", str(plan), "--mode", "controlled")
    assert done.returncode == 0, done.stderr
    assert "GPU telemetry: nvidia-smi" in done.stderr
    window = only_window(plan)
    decision = json.loads((window / "decision.json").read_text())
    assert decision["verdict"] == "INCONCLUSIVE"
    (cell,) = decision["cells"]
    conditions = " ".join(cell["validity"]["conditions"])
    assert "starts ran at different clock caps" in conditions
    assert "cap differs from production's 1980 MHz in {'s2': 1755.0}" in conditions
    assert "the clock was dialled back inside the window: {'s2': 2} events" in conditions  # one per GPU
    rows = read_jsonl(window / "pooled.jsonl")
    assert {r["start"]: r["clock_cap_mhz"] for r in rows} == {"s1": 1980.0, "s2": 1755.0, "s3": 1980.0}
    assert sum(r["thermal_events"] for r in rows if r["start"] == "s2") == 2
    assert all(r["thermal_events"] == 0 for r in rows if r["start"] != "s2")
    s2 = json.loads((window / "starts" / "s2" / "start.json").read_text())["telemetry"]
    assert s2["cap_by_gpu"] == {"GPU-fake-0": 1755.0, "GPU-fake-1": 1755.0}
    assert [(d["gpu"], d["kind"]) for d in s2["dialbacks"]] == [(0, "thermal"), (1, "thermal")]
    samples = read_jsonl(window / "starts" / "s2" / "telemetry.jsonl")
    assert len(samples) >= 2 * 5 and {s["format"] for s in samples} == {"fairwin.telemetry/1"}
    summary = (window / "summary.md").read_text()
    assert "## GPU telemetry" in summary and "| s2 | nvidia-smi |" in summary and "thermal on GPU 0" in summary
    manifest = json.loads((window / "window.json").read_text())
    assert manifest["telemetry"]["production_cap_mhz"] == 1980.0


@pytest.mark.slow
def test_a_compute_process_on_the_gpus_fails_the_quiet_proof_before_anything_is_measured(
    make_plan: PlanFactory, monkeypatch: pytest.MonkeyPatch, stop_production: list[Path]
) -> None:
    from tests.integration.production import production_plan

    monkeypatch.setenv("PATH", f"{FIXTURES}:{os.environ['PATH']}")
    plan = production_plan(make_plan, "gpu-quiet")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    # Someone else's job holds the GPUs (the stand-in nvidia-smi lists it as a compute process).
    stray = subprocess.Popen([sys.executable, "-m", "fairwin", "sim", "--port", str(free_port()), "--model", "stray"],
                             env={**os.environ, "FAKE_GPU_CAP": "1980"}, stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    finally:
        stray.kill()
        stray.wait()
    assert done.returncode == 3, done.stderr
    assert f"the hardware is not quiet before s1: pid {stray.pid} (python3) computes on GPU GPU-fake-0" in done.stderr
    window = only_window(plan)
    assert not (window / "starts" / "s1").exists() and status(window)["restore"]["state"] == "RESTORED"
