"""A window's admission: what refuses it before production is taken down, the same through the CLI's run_window
and the public open_window (real `fairwin sim` processes, production a sim fairwin launched)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import fairwin
from fairwin.production.proof import port_state
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import SimProcess, only_window, processes_with
from tests.integration.helpers import fairwin as run_cli
from tests.integration.production import production_plan, start_run, wait_for_step
from tests.ports import free_port


def test_a_typo_in_role_bs_command_is_refused_before_production_goes_down(
    make_plan: PlanFactory, stop_production: list[Path]
) -> None:
    typo = sim_role(model="exp-typo")
    typo["argv"] = ["/opt/nowhere/python3", *typo["argv"][1:]]
    plan = production_plan(make_plan, "typo", B=typo)
    stop_production.append(plan)
    assert run_cli("production", "up", str(plan)).returncode == 0
    done = run_cli("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 4 and done.stderr.count("\n") == 1, done.stderr
    assert "before production is taken down: role B: '/opt/nowhere/python3' is not an executable file" in done.stderr
    assert run_cli("production", "status", str(plan)).returncode == 0  # production was never touched: still UP
    windows = plan.parent / "windows"
    assert not any(p.is_dir() and p.name != ".production" for p in windows.iterdir())  # no window, no start
    assert processes_with("exp-typo") == []


def test_a_fixed_port_held_by_another_server_is_refused_before_anything_starts(make_plan: PlanFactory) -> None:
    squatter = SimProcess("--model", "held-before")
    squatter.wait_healthy()
    try:
        role = sim_role(model="held-role", port=squatter.port)
        plan = make_plan(roles={"A": role, "B": role})
        done = run_cli("run", str(plan), "--mode", "controlled", "--quiet")
    finally:
        squatter.stop()
    assert done.returncode == 4 and done.stderr.count("\n") == 1, done.stderr
    assert f"role A: port {squatter.port} here is already held by pid {squatter.process.pid} (" in done.stderr
    assert "fairwin sim --port" in done.stderr  # the holder's command line
    assert not (plan.parent / "windows").exists() and processes_with("held-role") == []


def _typo(make_plan: PlanFactory, tmp_path: Path) -> Path:
    role = sim_role(model="api-typo")
    role["argv"] = ["no-such-engine-binary", *role["argv"][1:]]
    return make_plan(roles={"A": sim_role(model="api-a"), "B": role})


def _missing_cwd(make_plan: PlanFactory, tmp_path: Path) -> Path:
    return make_plan(roles={"A": sim_role(model="api-a", cwd=str(tmp_path / "gone")), "B": sim_role(model="api-b")})


def _held_port(make_plan: PlanFactory, tmp_path: Path) -> Path:
    port = free_port()
    holder = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], stderr=subprocess.DEVNULL
    )
    _HELD.append(holder)
    deadline = time.monotonic() + 10
    while port_state(f"http://127.0.0.1:{port}") != "open":
        assert time.monotonic() < deadline and holder.poll() is None
        time.sleep(0.05)
    return make_plan(roles={"A": sim_role(model="api-a", port=port), "B": sim_role(model="api-b")})


def _held_lock(make_plan: PlanFactory, tmp_path: Path) -> Path:
    plan = make_plan()
    lock = plan.parent / "windows" / ".window.lock"
    lock.parent.mkdir()
    record = {"format": "fairwin.lock/1", "window_id": "w-other", "window_path": str(lock.parent / "w-other")}
    lock.write_text(json.dumps({**record, "host": "elsewhere", "pid": 1, "coordinator": "c", "started_unix": 0}))
    return plan


_HELD: list[subprocess.Popen[bytes]] = []

# Each admission check, and the words its refusal names.
CHECKS: dict[str, tuple[Callable[[PlanFactory, Path], Path], str]] = {
    "command": (_typo, "'no-such-engine-binary' is not an executable file"),
    "working directory": (_missing_cwd, "its working directory"),
    "fixed port": (_held_port, "is already held by pid"),
    "lock": (_held_lock, "the hardware is held by window w-other"),
}


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_open_window_refuses_what_run_window_refuses(make_plan: PlanFactory, tmp_path: Path, check: str) -> None:
    build, words = CHECKS[check]
    try:
        plan = build(make_plan, tmp_path)
        loaded = fairwin.load_plan(plan)
        refusals = []
        for entry in (fairwin.open_window, fairwin.run_window):
            with pytest.raises(fairwin.FairwinError) as refused:
                asyncio.run(entry(loaded, "controlled"))  # type: ignore[operator]
            refusals.append((type(refused.value), str(refused.value)))
    finally:
        for holder in _HELD:
            holder.kill()
        _HELD.clear()
    assert refusals[0] == refusals[1] and words in refusals[0][1], refusals
    windows = plan.parent / "windows"
    assert not windows.exists() or not [p for p in windows.iterdir() if p.is_dir()]  # nothing opened


@pytest.mark.slow  # in make test; test-fast keeps the quicker cases of the same feature
def test_a_second_window_on_the_same_machine_is_refused_whatever_its_output_directory(
    make_plan: PlanFactory, tmp_path: Path
) -> None:
    slow = sim_role("--ms-per-round", "20", model="machine-first")
    first_plan = make_plan(
        roles={"A": slow, "B": slow},
        cells={"c": {"families": ["prose"], "prompt_tokens": 32, "max_tokens": 200, "streams_per_wave": 1}},
    )
    other_plan = make_plan(
        roles={"A": sim_role(model="machine-second"), "B": sim_role(model="machine-second")}, name="other.toml"
    )
    first = start_run(first_plan)  # into the plan's windows/
    try:
        running = wait_for_step(first_plan, "start s1", first)
        for plan, out in ((first_plan, tmp_path / "elsewhere"), (other_plan, tmp_path / "other-out")):
            done = run_cli("run", str(plan), "--mode", "controlled", "--out", str(out), "--quiet")
            assert done.returncode == 4 and done.stderr.count("\n") == 1, done.stderr
            assert f"the hardware is held by window {running.name} (pid {first.pid} on " in done.stderr
            assert str(running) in done.stderr and "this machine's locks" in done.stderr
            assert not out.exists() and processes_with("machine-second") == []
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(60)
    assert first.returncode == 130
    again = run_cli("run", str(other_plan), "--mode", "controlled", "--out", str(tmp_path / "after"), "--quiet")
    assert again.returncode == 0, again.stderr  # the first window let the machine go when it stopped


def test_a_busy_host_is_in_the_summary_the_page_and_the_context_and_quiet_never_hides_it(
    make_plan: PlanFactory,
) -> None:
    plan = make_plan(window={"idle_check_s": 0.5, "repeats": 2, "report_html": True})
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # one core of the machine, busy
    try:
        running = start_run(plan, "--mode", "controlled")
        # s1's host condition is read before its server is launched: the busy core has done its part then,
        # and is not left to take a core from the rest of the window (and from the suite's other tests).
        wait_for_step(plan, "start s1", running, event="launching")
    finally:
        hog.kill()
    _, stderr = running.communicate(timeout=120)
    assert running.returncode == 0, stderr
    assert "warning: the host was not idle before s1" in stderr  # --quiet hides progress, not this
    window = only_window(plan)
    context = json.loads((window / "context.json").read_text())
    assert any(f.startswith("the host was not idle before s1") for f in context["host_findings"])
    assert "the host was not idle before s1" in (window / "summary.md").read_text()
    assert "the host was not idle before s1" in (window / "report.html").read_text()
