"""What fairwin reads from Slurm's own commands (fairwin.launch.scheduler), on their printed output."""

from __future__ import annotations

import pytest

from fairwin.launch import scheduler

#: `scontrol listpids STEP NODE` listing pid 1 for a step (a placeholder's step was once recorded as pid 1; the
#: listing itself was not kept, so its other columns here are the command's usual ones).
NOT_YET = "PID      JOBID    STEPID   LOCALID GLOBALID\n1        7        4        -        -\n"


def test_a_step_listing_only_pid_1_has_no_task_yet_and_a_real_task_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler, "slurm", lambda *argv: NOT_YET)
    assert scheduler.step_pids("7.4", "n1", away=False) == []
    monkeypatch.setattr(scheduler, "slurm", lambda *argv: NOT_YET + "4242     7        4        0        0\n")
    assert scheduler.step_pids("7.4", "n1", away=False) == [4242]
