"""Production (a real `fairwin sim` process, launched detached) taken down for a window and given back."""

from __future__ import annotations

import asyncio
import functools
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fairwin.errors import ANSWER_IS_NO, ServerExitedError
from fairwin.files import read_jsonl
from fairwin.launch.spec import LaunchSpec
from fairwin.plan import load_plan
from fairwin.production.proof import port_state
from fairwin.window.processes import ServerHandle, local_launcher
from fairwin.window.run import run_window
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import fairwin, processes_with, status
from tests.integration.production import killed_inside, production_plan, production_state, start_run, wait_for_step
from tests.ports import free_port


# make test-fast runs the {python} case; the {env:NAME} one (the demo's argv) in make test.
@pytest.mark.parametrize("python", ["{python}", pytest.param("{env:FW_PRODUCTION_PYTHON}", marks=pytest.mark.slow)])
def test_production_commands_prove_up_and_down(
    make_plan: PlanFactory, stop_production: list[Path], monkeypatch: pytest.MonkeyPatch, python: str
) -> None:
    # production.json records argv as the plan writes it ({env:NAME} unresolved, as the demo's vLLM is
    # launched): fairwin must still know its own production by it, to watch it come up and to stop it.
    monkeypatch.setenv("FW_PRODUCTION_PYTHON", sys.executable)
    role = sim_role(model="prod-cmd", port=free_port())
    plan = production_plan(make_plan, "prod-cmd", P={**role, "argv": [python, *role["argv"][1:]]})
    stop_production.append(plan)
    assert fairwin("production", "status", str(plan)).returncode == ANSWER_IS_NO
    up = fairwin("production", "up", str(plan), "--watch")
    assert up.returncode == 0, up.stderr
    assert up.stdout.startswith("UP: launched pid") and "watch held" in up.stdout and "2 of 2 requests" in up.stdout
    state = json.loads((production_state(plan) / "production.json").read_text())
    assert processes_with("prod-cmd") == [state["pid"]]  # one process, the one recorded
    assert fairwin("production", "status", str(plan)).stdout.startswith("UP:")
    again = fairwin("production", "up", str(plan))
    assert again.stdout.startswith("UP: already up")
    down = fairwin("production", "down", str(plan))
    assert down.returncode == 0 and down.stdout.startswith(f"DOWN: stopped pid {state['pid']} (SIGTERM)"), down.stdout
    assert processes_with("prod-cmd") == []
    assert fairwin("production", "status", str(plan)).returncode == ANSWER_IS_NO


#: The steps of a three-start window with production, in the order the journal records them.
STEPS = [
    "open",
    "production down",
    "quiet",
    "start s1",
    "start s2",
    "start s3",
    "quiet after",
    "restore",
    "decide",
    "archive",
    "budget",
    "close",
]


def recording_launcher(production_url: str, seen: list[str]):  # type: ignore[no-untyped-def]
    def launch(spec: LaunchSpec, log_path: Path) -> ServerHandle:
        seen.append(f"{spec.role_name}: production {port_state(production_url)}")
        return local_launcher(spec, log_path)

    return launch


def test_a_window_takes_production_down_and_gives_it_back(make_plan: PlanFactory, stop_production: list[Path]) -> None:
    plan = production_plan(make_plan, "prod-win")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    loaded = load_plan(plan)
    url = loaded.plan.roles["P"].base_url.replace("{port}", str(loaded.plan.roles["P"].port))
    seen: list[str] = []
    result = asyncio.run(run_window(loaded, "controlled", launcher=recording_launcher(url, seen)))
    assert seen == ["A: production refused", "B: production refused", "A: production refused"]
    steps = [(e["step"], e["event"]) for e in read_jsonl(result.window.journal)]
    begun = [step for step, event in steps if event == "begin"]
    assert begun == STEPS
    final = status(result.window.path)
    assert final["state"] == "complete" and final["restore"]["state"] == "RESTORED"
    assert final["restore"]["watch"]["answered"] == 2 and final["restore"]["watch"]["ok"]
    assert "production: RESTORED" in (result.window.path / "summary.md").read_text()
    manifest = json.loads((result.window.path / "window.json").read_text())
    assert manifest["production"]["role"] == "P" and len(manifest["production"]["sha256"]) == 64
    assert fairwin("production", "status", str(plan)).returncode == 0
    assert len(processes_with("prod-win")) == 1 and processes_with("exp-prod-win") == []  # production, nothing else


def test_a_failed_start_gives_production_back(make_plan: PlanFactory, stop_production: list[Path]) -> None:
    plan = production_plan(make_plan, "prod-fail", B=sim_role("--fault", "exit-at-start", model="exp-prod-fail"))
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    with pytest.raises(ServerExitedError) as raised:
        asyncio.run(run_window(load_plan(plan), "controlled", order="control-first"))
    window = raised.value.window_path
    assert window is not None
    final = status(window)
    assert final["state"] == "failed" and final["restore"]["state"] == "RESTORED"
    events = [(e["step"], e["event"]) for e in read_jsonl(window / "journal.jsonl")]
    assert events[-5:] == [
        ("start s2", "failed"),
        ("close", "begin"),
        ("restore", "begin"),
        ("restore", "end"),
        ("close", "end"),
    ]
    assert fairwin("production", "status", str(plan)).returncode == 0


@pytest.mark.slow
def test_the_lock_refuses_a_second_run_and_a_killed_window_is_recovered(
    make_plan: PlanFactory, stop_production: list[Path]
) -> None:
    plan = production_plan(make_plan, "prod-lock")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    first = start_run(plan)
    try:
        # From s1: production is down, and the window's three starts outlast the second run's refusal even when a
        # busy machine slows that command to seconds (killed after its restore, there would be nothing to give back).
        window = wait_for_step(plan, "start s1", first)
        second = fairwin("run", str(plan), "--quiet")
        assert second.returncode == 4 and "the hardware is held by window" in second.stderr, second.stderr
        assert "coordinator ci" in second.stderr
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        first.kill()
    refused = fairwin("run", str(plan), "--quiet")
    assert (
        refused.returncode == 4 and "died without finishing" in refused.stderr and "fairwin recover" in refused.stderr
    )
    assert len([p for p in (plan.parent / "windows").iterdir() if p.is_dir()]) == 2  # nothing new was opened
    recovered = fairwin("recover", str(plan))
    assert recovered.returncode == 0, recovered.stderr
    assert (
        recovered.stdout.startswith(f"recovered window {window.name}: stopped")
        and "production RESTORED" in recovered.stdout
    )
    assert processes_with("exp-prod-lock") == [] and fairwin("production", "status", str(plan)).returncode == 0
    final = status(window)
    assert final["state"] == "interrupted" and final["recovery"]["restore"]["state"] == "RESTORED"
    assert fairwin("recover", str(plan)).stdout.startswith("nothing to recover")
    assert fairwin("run", str(plan), "--quiet").returncode == 0  # the hardware is free again


# Every journaled step a kill can land in; make test-fast runs one of them (start s1).
KILL_AT = STEPS


@pytest.mark.parametrize(
    "step", [pytest.param(step, marks=() if step == "start s1" else pytest.mark.slow) for step in KILL_AT]
)
def test_a_window_killed_at_any_step_is_recovered(
    make_plan: PlanFactory, stop_production: list[Path], step: str
) -> None:
    plan = production_plan(make_plan, "prod-kill")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    kill_at = f"{step}:launched" if step.startswith("start") else f"{step}:begin"
    window = killed_inside(plan, start_run(plan, kill_at=kill_at), kill_at)
    recovered = fairwin("recover", str(plan))
    assert recovered.returncode == 0, recovered.stderr
    assert fairwin("production", "status", str(plan)).returncode == 0  # production healthy
    assert processes_with("exp-prod-kill") == []  # no experiment server left
    assert status(window)["state"] == "interrupted"
    events = [(e["step"], e["event"]) for e in read_jsonl(window / "journal.jsonl")]  # whole lines: nothing torn
    assert events[-2:] == [("recover", "begin"), ("recover", "end")]
    assert (step, "begin") in events and (step, "end") not in events  # killed inside the step
    for path in window.rglob("*.json"):
        json.loads(path.read_text())
    assert fairwin("recover", str(plan)).stdout.startswith("nothing to recover")


def test_the_demos_recipe_takes_its_production_down_when_the_window_is_refused(
    make_plan: PlanFactory, stop_production: list[Path]
) -> None:
    """`make demo`'s window part (`make demo-window`, the demo's own recipe) on a plan whose window is refused after
    production came up: the recipe exits non-zero and production is down, as the README promises."""
    role = sim_role(model="exp-prod-demo")
    plan = production_plan(make_plan, "prod-demo", B={**role, "argv": ["/nonexistent/python", *role["argv"][1:]]})
    stop_production.append(plan)
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        ["make", "-s", "-C", str(root), "demo-window", f"DEMO_PLAN={plan}", "DEMO_ENV=/dev/null"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0, done.stdout
    assert "UP: launched pid" in done.stdout and "DOWN: stopped pid" in done.stdout, done.stdout + done.stderr
    assert "/nonexistent/python" in done.stderr
    assert processes_with("prod-demo") == []


def test_two_plans_sharing_an_output_directory_each_keep_their_own_production(
    make_plan: PlanFactory, stop_production: list[Path]
) -> None:
    """Two plans writing their windows to one directory (as the shipped examples do): each one's production is its
    own (up, status and down never see the other's), and a production whose port another server answers is
    refused at once, naming the holder, instead of waited on for its whole up timeout."""
    first = production_plan(make_plan, "prod-first")
    second = production_plan(functools.partial(make_plan, name="second.toml"), "prod-second")
    stop_production += [first, second]
    assert first.parent / "windows" == second.parent / "windows"
    assert fairwin("production", "up", str(first)).returncode == 0
    assert fairwin("production", "status", str(second)).returncode == ANSWER_IS_NO  # the first's is not its own
    up = fairwin("production", "up", str(second))
    assert up.returncode == 0 and up.stdout.startswith("UP: launched pid"), up.stderr
    assert len(processes_with("prod-first")) == 1 and len(processes_with("prod-second")) == 1
    down = fairwin("production", "down", str(second))
    assert down.returncode == 0 and processes_with("prod-second") == [] and len(processes_with("prod-first")) == 1
    # A third plan whose production's port is the first plan's: refused at once, naming the first's server.
    port = load_plan(first).plan.roles["P"].port
    third = production_plan(
        functools.partial(make_plan, name="third.toml"), "prod-third", P=sim_role(model="prod-third", port=port)
    )
    started = time.monotonic()
    taken = fairwin("production", "up", str(third))
    assert taken.returncode == 3, taken.stdout
    assert f"production's port is taken: http://127.0.0.1:{port} answers" in taken.stderr
    assert "held by pid" in taken.stderr and "prod-first" in taken.stderr
    assert time.monotonic() - started < 15  # not its up timeout (20 s)
