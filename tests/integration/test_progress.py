"""`fairwin run --progress-json`: every event a JSON line on stdout, in the window's own order."""

from __future__ import annotations

import json

import pytest

from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import fairwin, only_window


@pytest.mark.slow
def test_progress_json_follows_every_step_and_wave_and_ends_with_the_verdict(make_plan: PlanFactory) -> None:
    plan = make_plan(
        roles={"A": sim_role("--ms-per-round", "2"), "B": sim_role("--ms-per-round", "2")},
        window={"repeats": 2, "warmup_waves_max": 1},
    )
    done = fairwin("run", str(plan), "--mode", "controlled", "--progress-json")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]  # nothing else on stdout
    assert {e["format"] for e in events} == {"fairwin.progress/1"}
    opened = next(e for e in events if e["event"] == "open")
    assert [s["name"] for s in opened["starts"]] == ["s1", "s2", "s3"] and opened["estimate_s"] > 0
    waves = [e for e in events if e["event"] == "wave"]
    assert len(waves) == 3 * opened["waves_per_start"]
    steps = [(e["step"], e["state"]) for e in events if e["event"] == "step"]
    assert steps[:2] == [("open", "begin"), ("open", "end")] and ("budget", "end") in steps
    for wave in waves:  # each wave inside its own start's step
        step = f"start {wave['start']}"
        began, ended = (
            next(i for i, e in enumerate(events) if e.get("step") == step and e["state"] == state)
            for state in ("begin", "end")
        )
        assert began < events.index(wave) < ended
    window = only_window(plan)
    assert events[-1] == {
        **events[-1],
        "event": "close",
        "state": "complete",
        "path": str(window),
        "verdict": json.loads((window / "decision.json").read_text())["verdict"],
    }
