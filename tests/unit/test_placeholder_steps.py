"""The hold job's batch step as a Slurm chain runs it (production/placeholder_steps.py), here without Slurm: the
script it runs reads placeholder requests from its FIFO, runs each, and leaves nothing behind when told to end; a
window asking where nothing reads is refused at once."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from fairwin.errors import ProductionError
from fairwin.production.placeholder_steps import HoldSteps, batch_script, requests_path


def steps_of(tmp_path: Path, job: str) -> HoldSteps:
    return HoldSteps(job, "n1", tmp_path, tmp_path / "state", tmp_path, {})


def wait_for(path: Path, present: bool = True, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while path.exists() != present:
        assert time.monotonic() < deadline, f"{path} {'never appeared' if present else 'was never removed'}"
        time.sleep(0.02)


def test_the_batch_step_runs_each_script_it_is_asked_to_and_removes_its_fifo_when_the_job_ends(
    tmp_path: Path,
) -> None:
    fifo = requests_path(tmp_path, "41")
    batch = subprocess.Popen(["sh", "-c", batch_script(tmp_path)], env={**os.environ, "SLURM_JOB_ID": "41"})
    try:
        wait_for(fifo)
        for name in ("first", "second"):
            script = tmp_path / f"{name}.sh"
            script.write_text(f"echo {name} > {tmp_path / name}.ran\n")
            steps_of(tmp_path, "41").ask(script)
        wait_for(tmp_path / "first.ran")
        wait_for(tmp_path / "second.ran")
        assert [(tmp_path / f"{n}.ran").read_text() for n in ("first", "second")] == ["first\n", "second\n"]
    finally:
        batch.send_signal(signal.SIGTERM)  # what Slurm sends the batch step as the hold job ends
        assert batch.wait(timeout=10) == 0
    assert not fifo.exists()


def test_a_window_asking_a_hold_job_whose_batch_step_reads_no_requests_is_refused_naming_the_fifo(
    tmp_path: Path,
) -> None:
    fifo = requests_path(tmp_path, "42")
    with pytest.raises(ProductionError) as never_made:
        steps_of(tmp_path, "42").ask(tmp_path / "s.sh")
    os.mkfifo(fifo)  # made, but nothing reads it: the batch step ended, or is not fairwin's
    with pytest.raises(ProductionError) as unread:
        steps_of(tmp_path, "42").ask(tmp_path / "s.sh")
    assert (str(never_made.value), str(unread.value)) == (
        f"the chain's hold job 42 takes no placeholder requests ({fifo}: No such file or directory); its batch step "
        "must be fairwin's (`fairwin submit --chain` queues it)",
        f"the chain's hold job 42 takes no placeholder requests ({fifo}: No such device or address); its batch step "
        "must be fairwin's (`fairwin submit --chain` queues it)",
    )
