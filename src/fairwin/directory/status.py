"""``status.json``, the window's one marker of what it is, and the custody states production is left in.

Only ``complete`` is a result. A finished window's status also says what became of production
(``restore``): RESTORED (brought back and the watch held), RESTORE FAILED, CHAINED (left down
for the chain's next window), or RETURNING (handed back to Slurm, which runs it again when the
window's job ends; proved after that, then RESTORED or RESTORE FAILED). These states are compared
by the close, the chain, recover and the promotion gate, so they are one type, here.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from fairwin.formats import STATUS, RecordFormat
from fairwin.records import CompactModel, Record

#: A window's state in status.json: only ``complete`` is a result.
WindowState = Literal["running", "complete", "failed", "interrupted"]

#: What became of production at a window's end.
CustodyState = Literal["RESTORED", "RESTORE FAILED", "CHAINED", "RETURNING"]


class Coordinator(BaseModel):
    """Who runs a window: the coordinator's name, the machine it runs on and fairwin's pid there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    host: str
    pid: int


class UpRecord(BaseModel):
    """How production was brought up (or taken down) and proved: the action, what was done, the proof."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: str  # "up" | "down"
    how: str  # "launched pid N" / "stopped pid N (SIGTERM)" / "ran: CMD" / "already down"
    proof: str
    seconds: float


class WatchRecord(BaseModel):
    """The watch after a restore: health checks and real requests over its seconds, and what went wrong."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ok: bool
    seconds: float
    health_checks: int
    health_failures: int
    requests: int
    answered: int
    problems: list[str]


class ChainRecord(BaseModel):
    """A window's part in a chain, in window.json (with ``last``) and status.json: the chain, its place in it,
    how it ended; an aborted chain's decision and reason."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chain_id: str | None = None  # None until a window's hold over names the chain
    position: int
    end: Literal["CHAINED", "ENDED", "ABORTED"] | None
    marker: str
    decision: Literal["REJECT"] | None = None
    reason: str | None = None
    last: bool | None = None  # window.json's: the window was run with --chain-last


class ArchiveProblem(BaseModel):
    """Why a window's control starts were not appended to the archive, with the command that retries."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    appended: Literal[False]  # required, so a sparse status.json always says it
    problem: str


class SlurmReturn(BaseModel):
    """Production run by Slurm, given back by it: the window's job, when Slurm ended it, and how long after that
    production answered health (the first 200 the proof saw)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window_job: str
    job_ended: str  # Slurm's EndTime of the window's job, as it says it
    answered_after_s: float | None = None  # None: it did not answer


class Restore(CompactModel):
    """Production given back (``up`` and its ``watch``), not given back (``reason``), or left to a chain."""

    model_config = ConfigDict(extra="forbid")

    state: CustodyState
    reason: str | None = None
    up: UpRecord | None = None
    watch: WatchRecord | None = None
    placeholders: list[str] | None = None  # CHAINED: the placeholders holding the hardware meanwhile
    slurm: SlurmReturn | None = None  # given back by Slurm after the window's job

    @property
    def restored(self) -> bool:
        return self.state == "RESTORED"


class RecoveryRecord(BaseModel):
    """What ``fairwin recover`` did for a window fairwin died in: the servers it stopped, production's restore."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stopped: list[str]
    restore: Restore | None


class TeamRelease(BaseModel):
    """``status.json``'s ``team_release``: whether the team's release ([custody]) ran and released; one that did
    not is owed, and ``fairwin recover PLAN`` runs it again until it does."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    released: bool
    time: float
    error: str | None = None
    attempts: int = 1  # the window's own, and every recover since

    def said(self) -> str:
        """How the summary and the page say it."""
        if self.released:
            return "released"
        return f"NOT RELEASED, owed ({self.error}); `fairwin recover PLAN` runs it again"


class WindowStatus(Record):
    """``status.json``: every state carries its window, state and time; a complete one adds its verdict and
    decision.json's digest, a failed or interrupted one its error, a finished one what became of production."""

    record_format: ClassVar[RecordFormat] = STATUS
    sparse: ClassVar[bool] = True
    model_config = ConfigDict(extra="allow")  # a newer fairwin's additions are kept when one is rewritten

    format: Literal["fairwin.status/1"] = "fairwin.status/1"
    window_id: str
    state: WindowState
    time: float
    coordinator: Coordinator | None = None
    verdict: str | None = None
    decision_sha256: str | None = None
    error: str | None = None
    error_type: str | None = None
    restore: Restore | None = None
    chain: ChainRecord | None = None
    archive: ArchiveProblem | None = None
    recovery: RecoveryRecord | None = None
    team_release: TeamRelease | None = None

    @property
    def chain_id(self) -> str | None:
        return self.chain.chain_id if self.chain is not None and self.chain.chain_id else None
