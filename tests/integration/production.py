"""Production in integration tests: a `fairwin sim` launched detached as role P, and taken down after."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fairwin.durable import scan_jsonl
from fairwin.launch.local import free_port
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import fairwin

WATCH = {"watch_s": 1, "watch_requests": 2, "up_timeout_s": 20, "down_timeout_s": 10}


def production_plan(
    make_plan: PlanFactory, model: str, *p_flags: str, window: dict[str, Any] | None = None,
    chain: dict[str, Any] | None = None, **roles: Any,
) -> Path:  # fmt: skip
    port = free_port()
    return make_plan(
        roles={  # the experiment's servers are told apart from production's by their model name
            "A": sim_role("--ms-per-round", "2", model=f"exp-{model}"),
            "B": sim_role("--ms-per-round", "2", model=f"exp-{model}"),
            "P": sim_role(*p_flags, model=model, port=port),
            **roles,
        },
        window={"repeats": 2, "warmup_waves_max": 1, **(window or {})},
        cells={"c": {"families": ["prose"], "prompt_tokens": 64, "max_tokens": 16, "streams_per_wave": 1}},
        production={"role": "P", **WATCH},
        chain=chain,
    )


@pytest.fixture
def stop_production() -> Iterator[list[Path]]:
    """Plans whose production (and any chain's placeholders) are taken down after the test, whatever happened."""
    plans: list[Path] = []
    yield plans
    for plan in plans:
        fairwin("chain", "abort", str(plan))  # a chain a failed test left: its placeholders go too
        fairwin("production", "down", str(plan))


def start_run(plan: Path, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "fairwin", "run", str(plan), "--quiet", "--coordinator", "ci",
                             *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def wait_for_step(plan: Path, step: str, process: subprocess.Popen[str], timeout: float = 60) -> Path:
    """The running window's directory, once its journal shows ``step`` begun."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for journal in (plan.parent / "windows").glob("*/journal.jsonl"):
            if any(e.get("step") == step and e.get("event") == "begin" for e in scan_jsonl(journal)[0]):
                return journal.parent
        assert process.poll() is None, process.communicate()
        time.sleep(0.02)
    raise AssertionError(f"step {step} never began")


def kill_inside_step(
    plan: Path, step: str, process: subprocess.Popen[str], event: str = "begin", timeout: float = 60
) -> Path:
    """SIGKILL the window inside ``step``, once its ``event`` is journaled and before the step ends.

    Every journal append takes the journal's exclusive flock. This holds that lock and hands it to
    the window one append at a time (only when /proc/locks shows the window waiting for it), so no
    row is written unseen: the window is killed as soon as the row appears, however short the step."""
    deadline = time.monotonic() + timeout
    while not (found := [j for j in (plan.parent / "windows").glob("*/journal.jsonl") if _running(j.parent)]):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the window never opened"
        time.sleep(0.001)
    journal = found[0]
    fd = os.open(journal, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        while True:
            events = [(e.get("step"), e.get("event")) for e in scan_jsonl(journal)[0]]
            if (step, event) in events:
                assert not {(step, "end"), (step, "failed")} & set(events), f"{step} ended unseen: {events}"
                process.send_signal(signal.SIGKILL)
                process.wait(10)
                return journal.parent
            while not _waiting_for(journal.stat().st_ino):
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, f"the window never reached {step}"
                time.sleep(0.001)
            fcntl.flock(fd, fcntl.LOCK_UN)  # the waiting window appends one row ...
            fcntl.flock(fd, fcntl.LOCK_EX)  # ... and this waits for its unlock
    finally:
        os.close(fd)


def _waiting_for(inode: int) -> bool:
    """Whether some process is blocked waiting for a lock on the file with this inode (``/proc/locks``)."""
    return any("->" in line and f":{inode} " in line for line in Path("/proc/locks").read_text().splitlines())


def _running(window: Path) -> bool:
    """The window is still running (an earlier window of the same plan is not the one to kill)."""
    try:
        return bool(json.loads((window / "status.json").read_text())["state"] == "running")
    except (OSError, ValueError, KeyError):
        return False
