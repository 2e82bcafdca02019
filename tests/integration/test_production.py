"""Production (a real `fairwin sim` process, launched detached) taken down for a window and given back."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fairwin.durable import read_jsonl
from fairwin.errors import ServerExitedError
from fairwin.launch.local import LaunchSpec, free_port
from fairwin.plan import load_plan
from fairwin.production.proof import port_state
from fairwin.window.run import run_window
from fairwin.window.start import ServerHandle, local_launcher
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import fairwin, only_window, processes_with, status

WATCH = {"watch_s": 1, "watch_requests": 2, "up_timeout_s": 20, "down_timeout_s": 10}


def production_plan(make_plan: PlanFactory, model: str, *p_flags: str, **roles: Any) -> Path:
    port = free_port()
    return make_plan(
        roles={
            "A": sim_role("--ms-per-round", "2", model=model),
            "B": sim_role("--ms-per-round", "2", model=model),
            "P": sim_role(*p_flags, model=model, port=port),
            **roles,
        },
        window={"repeats": 2},
        production={"role": "P", **WATCH},
    )


@pytest.fixture
def stop_production() -> Iterator[list[Path]]:
    """Plans whose production is taken down after the test, whatever happened."""
    plans: list[Path] = []
    yield plans
    for plan in plans:
        fairwin("production", "down", str(plan))


def test_production_commands_prove_up_and_down(make_plan: PlanFactory, stop_production: list[Path]) -> None:
    plan = production_plan(make_plan, "prod-cmd")
    stop_production.append(plan)
    assert fairwin("production", "status", str(plan)).returncode == 1
    up = fairwin("production", "up", str(plan), "--watch")
    assert up.returncode == 0, up.stderr
    assert up.stdout.startswith("UP: launched pid") and "watch held" in up.stdout and "2 of 2 requests" in up.stdout
    state = json.loads((plan.parent / "windows" / ".production" / "production.json").read_text())
    assert processes_with("prod-cmd") == [state["pid"]]  # one process, the one recorded
    assert fairwin("production", "status", str(plan)).stdout.startswith("UP:")
    again = fairwin("production", "up", str(plan))
    assert again.stdout.startswith("UP: already up")
    down = fairwin("production", "down", str(plan))
    assert down.returncode == 0 and down.stdout.startswith(f"DOWN: stopped pid {state['pid']} (SIGTERM)"), down.stdout
    assert processes_with("prod-cmd") == []
    assert fairwin("production", "status", str(plan)).returncode == 1


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
    assert begun == ["open", "production down", "quiet", "start s1", "start s2", "start s3", "quiet after",
                     "restore", "decide", "archive", "budget", "close"]  # fmt: skip
    final = status(result.window.path)
    assert final["state"] == "complete" and final["restore"]["state"] == "RESTORED"
    assert final["restore"]["watch"]["answered"] == 2 and final["restore"]["watch"]["ok"]
    assert "production: RESTORED" in (result.window.path / "summary.md").read_text()
    manifest = json.loads((result.window.path / "window.json").read_text())
    assert manifest["production"]["role"] == "P" and len(manifest["production"]["sha256"]) == 64
    assert fairwin("production", "status", str(plan)).returncode == 0
    assert processes_with("prod-win") and len(processes_with("prod-win")) == 1  # production, and nothing else


def test_a_failed_start_gives_production_back(make_plan: PlanFactory, stop_production: list[Path]) -> None:
    plan = production_plan(make_plan, "prod-fail", B=sim_role("--fault", "exit-at-start", model="prod-fail"))
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    with pytest.raises(ServerExitedError) as raised:
        asyncio.run(run_window(load_plan(plan), "controlled", order="control-first"))
    window = raised.value.window_path
    assert window is not None
    final = status(window)
    assert final["state"] == "failed" and final["restore"]["state"] == "RESTORED"
    events = [(e["step"], e["event"]) for e in read_jsonl(window / "journal.jsonl")]
    assert events[-5:] == [("start s2", "failed"), ("close", "begin"), ("restore", "begin"), ("restore", "end"),
                           ("close", "end")]  # fmt: skip
    assert fairwin("production", "status", str(plan)).returncode == 0


def test_production_that_does_not_come_back_is_restore_failed_exit_6(make_plan: PlanFactory) -> None:
    # Production is down already (it never ran); the restore launches it, and it exits at once.
    plan = production_plan(make_plan, "prod-gone", "--fault", "exit-at-start")
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 6, done.stderr
    assert "RESTORE FAILED" in done.stderr and done.stderr.count("\n") == 1, done.stderr
    final = status(only_window(plan))
    assert final["restore"]["state"] == "RESTORE FAILED" and "exited" in final["restore"]["reason"]
    assert processes_with("prod-gone") == []
