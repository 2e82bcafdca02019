"""Production in integration tests: a `fairwin sim` launched detached as role P, and taken down after."""

from __future__ import annotations

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

from fairwin.directory.journal import DRILL_KILL_AT
from fairwin.files import scan_jsonl
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import OWN_SESSION, fairwin
from tests.ports import free_port


def production_state(plan: Path) -> Path:
    """The plan's own production state directory, in its windows' output directory."""
    from fairwin.production.control import plan_slot

    return plan.parent / "windows" / ".production" / plan_slot(plan)


WATCH = {"watch_s": 1, "watch_requests": 2, "up_timeout_s": 20, "down_timeout_s": 10}


def production_plan(
    make_plan: PlanFactory,
    model: str,
    *p_flags: str,
    window: dict[str, Any] | None = None,
    chain: dict[str, Any] | None = None,
    streams_per_wave: int = 1,
    **roles: Any,
) -> Path:
    """A plan of roles A and B (or those given) with production P; ``streams_per_wave`` for a test whose verdict
    rests on client timing, which a repeat keeps while half its streams are trusted: one stream whose client waited
    for a CPU makes a one-stream repeat's client metrics unobserved."""
    port = free_port()
    return make_plan(
        roles={  # the experiment's servers are told apart from production's by their model name
            "A": sim_role("--ms-per-round", "2", model=f"exp-{model}"),
            "B": sim_role("--ms-per-round", "2", model=f"exp-{model}"),
            "P": sim_role(*p_flags, model=model, port=port),
            **roles,
        },
        window={"repeats": 2, "warmup_waves_max": 1, **(window or {})},
        cells={
            "c": {"families": ["prose"], "prompt_tokens": 64, "max_tokens": 16, "streams_per_wave": streams_per_wave}
        },
        production={"role": "P", **WATCH},
        chain=chain,
    )


@pytest.fixture
def stop_production(scratch_chain_marker: Path) -> Iterator[list[Path]]:
    """Plans whose production (and any chain's placeholders) are taken down after the test, whatever happened."""
    plans: list[Path] = []
    yield plans
    for plan in plans:
        # A chain a failed test left: its placeholders go too. Its marker is this test's scratch file (the
        # environment's path wins over a plan's), and `chain abort` does nothing without one: no command then.
        if scratch_chain_marker.exists():
            fairwin("chain", "abort", str(plan))
        fairwin("production", "down", str(plan))


def start_run(plan: Path, *flags: str, kill_at: str | None = None) -> subprocess.Popen[str]:
    """``fairwin run`` in the background; ``kill_at`` ("STEP:EVENT") is the recovery drill's kill -9."""
    env = {**os.environ, DRILL_KILL_AT: kill_at} if kill_at else None
    return subprocess.Popen(
        [sys.executable, "-m", "fairwin", "run", str(plan), "--quiet", "--coordinator", "ci", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=OWN_SESSION,
    )


def wait_for_step(
    plan: Path, step: str, process: subprocess.Popen[str], timeout: float = 60, event: str = "begin"
) -> Path:
    """The running window's directory, once its journal shows ``step``'s ``event`` (begun, by default)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for journal in (plan.parent / "windows").glob("*/journal.jsonl"):
            if any(e.get("step") == step and e.get("event") == event for e in scan_jsonl(journal)[0]):
                return journal.parent
        assert process.poll() is None, process.communicate()
        time.sleep(0.02)
    raise AssertionError(f"step {step} never reached {event}")


def killed_inside(plan: Path, process: subprocess.Popen[str], kill_at: str, timeout: float = 60) -> Path:
    """The window that ``process`` (started with ``kill_at``) was, once the drill killed it right after that row."""
    try:
        assert process.wait(timeout) == -signal.SIGKILL, process.communicate()
    finally:
        process.kill()
    killed = [j for j in (plan.parent / "windows").glob("*/journal.jsonl") if _running(j.parent)]
    assert len(killed) == 1, killed
    last = scan_jsonl(killed[0])[0][-1]
    assert f"{last['step']}:{last['event']}" == kill_at  # killed inside the step: nothing after that row
    return killed[0].parent


def _running(window: Path) -> bool:
    """The window is still running (an earlier window of the same plan is not the one to kill)."""
    try:
        return bool(json.loads((window / "status.json").read_text())["state"] == "running")
    except (OSError, ValueError, KeyError):
        return False
