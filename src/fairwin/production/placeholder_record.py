"""What a chain records of a placeholder it started, so that the next window (or an abort) proves and stops it."""

from __future__ import annotations

from pydantic import ConfigDict

from fairwin.records import CompactModel


class RunningPlaceholder(CompactModel):
    """A placeholder as started (or found left running): its name, pid and command; on a host, its tmux session.
    Kept in the chain's marker and the journal, so the next window (or an abort) can prove and stop it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    argv: list[str]
    pid: int | None = None  # None: found by its declaration only, never seen running
    host: str | None = None
    session: str | None = None
    tmux_socket: str | None = None
    slurm_step: str | None = None  # a step of a Slurm chain's hold job (JOB.STEP), on ``node``
    node: str | None = None
