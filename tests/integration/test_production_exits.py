"""Every way out of a window gives production back: signals at each start (and a second one during the
restore), an exception at each start, a restore that fails after a complete measurement, and recovery
from the declaration the window opened with."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fairwin.files import read_jsonl, scan_jsonl
from fairwin.gates.calibration import calibrate
from fairwin.gates.estimate import estimate
from fairwin.launch.spec import LaunchSpec
from fairwin.plan import load_plan
from fairwin.window.preflight import preflight
from fairwin.window.processes import ServerHandle, local_launcher
from fairwin.window.run import run_window
from tests.conftest import PlanFactory
from tests.integration.helpers import OWN_SESSION, fairwin, only_window, processes_with, status
from tests.integration.production import killed_inside, production_plan, start_run


def journal_has(window: Path, step: str, event: str, after: tuple[str, str] | None = None) -> bool:
    events = [(e.get("step"), e.get("event")) for e in scan_jsonl(window / "journal.jsonl")[0]]
    if after is not None:
        if after not in events:
            return False
        events = events[events.index(after) :]
    return (step, event) in events


def wait_until(check, process: subprocess.Popen[str], what: str, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert process.poll() is None, f"fairwin exited before {what}: {process.communicate()}"
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("sig", "start"),
    [
        pytest.param(signal.SIGINT, "s1", marks=pytest.mark.slow),
        (signal.SIGTERM, "s2"),  # the one make test-fast runs
        pytest.param(signal.SIGHUP, "s3", marks=pytest.mark.slow),
    ],
    ids=str,
)
def test_a_signal_at_any_start_restores_production_and_a_second_one_does_not_cut_the_restore(
    make_plan: PlanFactory, stop_production: list[Path], sig: signal.Signals, start: str
) -> None:
    plan = production_plan(make_plan, f"prod-sig-{start}")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    run = subprocess.Popen(
        [sys.executable, "-m", "fairwin", "run", str(plan), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as at a terminal
        start_new_session=OWN_SESSION,
    )
    try:
        windows = plan.parent / "windows"

        def window() -> Path:
            return next(p.parent for p in windows.glob("*/journal.jsonl"))

        wait_until(
            lambda: any(windows.glob("*/journal.jsonl")) and journal_has(window(), f"start {start}", "launched"),
            run,
            f"start {start}",
        )
        run.send_signal(sig)
        wait_until(lambda: journal_has(window(), "restore", "begin", after=("close", "begin")), run, "the restore")
        run.send_signal(sig)  # a second one, while production is being given back
        _, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err
    final = status(window())
    assert final["state"] == "interrupted" and final["restore"]["state"] == "RESTORED"
    assert journal_has(window(), "restore", "end", after=("close", "begin"))
    assert fairwin("production", "status", str(plan)).returncode == 0
    assert processes_with(f"exp-prod-sig-{start}") == []


def failing_launcher(at: int):  # type: ignore[no-untyped-def]
    launched = 0

    def launch(spec: LaunchSpec, log_path: Path) -> ServerHandle:
        nonlocal launched
        launched += 1
        if launched == at:
            raise RuntimeError(f"boom at launch {at}")
        return local_launcher(spec, log_path)

    return launch


@pytest.mark.parametrize("at", [pytest.param(at, marks=() if at == 2 else pytest.mark.slow) for at in (1, 2, 3)])
def test_an_exception_at_any_start_restores_production_and_keeps_finished_controls(
    make_plan: PlanFactory, stop_production: list[Path], at: int
) -> None:
    plan = production_plan(make_plan, f"prod-exc-{at}")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    with pytest.raises(RuntimeError, match=f"boom at launch {at}"):
        asyncio.run(run_window(load_plan(plan), "controlled", launcher=failing_launcher(at), order="control-first"))
    window = only_window(plan)
    final = status(window)
    assert final["state"] == "failed" and final["error_type"] == "RuntimeError"
    assert final["restore"]["state"] == "RESTORED"
    assert fairwin("production", "status", str(plan)).returncode == 0
    assert processes_with(f"exp-prod-exc-{at}") == []
    archive = plan.parent / "windows" / "control-archive.jsonl"
    archived = {row["start"] for row in read_jsonl(archive)} if archive.exists() else set()
    assert archived == ({"s1"} if at > 1 else set())  # s1, the finished control, is kept


def test_a_restore_that_fails_after_the_measurement_still_decides_and_exits_6(make_plan: PlanFactory) -> None:
    # Production is down already (it never ran); the restore launches it, and it exits at once.
    plan = production_plan(make_plan, "prod-gone", "--fault", "exit-at-start")
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 6, done.stderr
    assert done.stderr.count("\n") == 1 and "RESTORE FAILED" in done.stderr, done.stderr
    assert "the window itself completed" in done.stderr
    window = only_window(plan)
    final = status(window)
    assert final["state"] == "complete" and final["verdict"]  # the measurement stands
    assert final["restore"]["state"] == "RESTORE FAILED" and "exited" in final["restore"]["reason"]
    assert "production: **RESTORE FAILED**" in (window / "summary.md").read_text()
    events = [(e["step"], e["event"]) for e in read_jsonl(window / "journal.jsonl")]
    assert ("restore", "failed") in events and ("decide", "end") in events and events[-1] == ("close", "end")
    assert processes_with("prod-gone") == []


def test_recover_restores_production_as_declared_when_the_window_opened(
    make_plan: PlanFactory, stop_production: list[Path]
) -> None:
    plan = production_plan(make_plan, "prod-snap")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    killed_inside(plan, start_run(plan, kill_at="start s1:begin"), "start s1:begin")
    # Someone edits production's declaration before recovering: recovery restores what was taken down.
    plan.write_text(plan.read_text().replace('"--model", "prod-snap"', '"--model", "prod-snap-edited"'))
    recovered = fairwin("recover", str(plan))
    assert recovered.returncode == 0, recovered.stderr
    assert "production RESTORED" in recovered.stdout
    assert "the plan's [production] changed since the window opened" in recovered.stdout
    assert len(processes_with("--model prod-snap ")) == 1 and processes_with("prod-snap-edited") == []
    assert processes_with("exp-prod-snap") == []


@pytest.mark.slow
def test_the_budget_learns_production_down_and_restore_from_measured_windows(
    make_plan: PlanFactory, stop_production: list[Path]
) -> None:
    plan = production_plan(make_plan, "prod-budget")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    loaded = load_plan(plan)
    before = estimate(loaded, "controlled", preflight(loaded, "controlled").mode)
    assert before.sources["production down"].startswith("assumed")
    assert fairwin("run", str(plan), "--quiet").returncode == 0
    after = estimate(loaded, "controlled", preflight(loaded, "controlled").mode, calibrate(plan.parent / "windows"))
    assert after.sources["production down"].startswith("measured: median")
    assert after.sources["restore and watch"].startswith("measured: median")
    # The watch alone holds watch_s (1 s): a measured restore cannot be shorter.
    assert 1.0 <= after.restore_s < 30 and 0 < after.takedown_s < 10
    assert after.measurement_end_s == pytest.approx(after.takedown_s + sum(s.total_s for s in after.starts))
