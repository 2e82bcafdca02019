"""A window as a Slurm job: ``fairwin submit`` asks sbatch for an exclusive allocation of the plan's nodes, for as
long as the window's budget can take, with a signal before that limit so that the window closes and gives
production back in time; then follows the job to its end.

The job runs ``fairwin run`` itself (``exec``: the batch step is fairwin, so Slurm's signal reaches it, not a
shell that would not pass it on), inside the allocation the cluster allocation check then finds
(custody/slurm.py). Every command goes through the command seam.
"""

from __future__ import annotations

import asyncio
import math
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fairwin.errors import SchedulerError
from fairwin.gates.estimate import TimeEstimate
from fairwin.launch.scheduler import ENDED, job_fields, slurm
from fairwin.plan.cluster import ClusterSettings

#: A chain's hold job's name (sbatch -J): what `squeue` shows of a chain holding its nodes (custody/slurm_chain.py).
HOLD_NAME = "fairwin-chain"
#: Seconds the window's close may take after Slurm's signal beyond the restore the budget estimates.
CLOSE_MARGIN_S = 60.0


@dataclass(frozen=True)
class JobRequest:
    """What sbatch is asked for: the job's limit and how long before it the window is told to close."""

    time_limit_min: int
    signal_lead_s: int

    @classmethod
    def of(cls, found: TimeEstimate) -> JobRequest:
        """The window's upper bound (every start, the restore and the dry reserve) and a close margin; the signal
        comes early enough for the restore and that margin."""
        lead = math.ceil(found.restore_s + CLOSE_MARGIN_S)
        limit = math.ceil((found.dry_bound_after(len(found.starts)) + CLOSE_MARGIN_S) / 60.0)
        return cls(time_limit_min=max(limit, 1), signal_lead_s=lead)


def allocation_argv(cluster: ClusterSettings, name: str, time_limit_min: int, output: Path) -> list[str]:
    """``sbatch`` for an exclusive allocation of the plan's nodes: its name, its limit, its output file."""
    argv = ["sbatch", "--parsable", "--exclusive", "-N", str(cluster.count or len(cluster.nodes))]
    argv += ["-w", ",".join(cluster.nodes)] if cluster.nodes else []
    argv += ["-J", name, f"--time={time_limit_min}", "-o", str(output)]
    for flag, value in (
        ("-C", cluster.constraint),
        ("-p", cluster.partition),
        ("-A", cluster.account),
        ("--qos", cluster.qos),
    ):
        if value:
            argv += [flag, value]
    return argv


def sbatch_argv(
    cluster: ClusterSettings, request: JobRequest, name: str, output: Path, command: Sequence[str]
) -> list[str]:
    """``sbatch`` for one window: its nodes alone, its limit, its signal, its output file."""
    argv = allocation_argv(cluster, name, request.time_limit_min, output)
    return [*argv, f"--signal=B:TERM@{request.signal_lead_s}", "--wrap", "exec " + shlex.join(command)]


def submit(argv: Sequence[str]) -> str:
    """The job id sbatch answers (``--parsable``: ``ID`` or ``ID;CLUSTER``)."""
    said = slurm(*argv).strip()
    job = said.split(";")[0]
    if not job.isdigit():
        raise SchedulerError(f"sbatch answered {said!r}, not a job id")
    return job


@dataclass(frozen=True)
class JobState:
    """A job's state and, once it ended, its exit code (``ExitCode=N:SIGNAL``: the batch step's)."""

    state: str
    exit_code: int | None = None

    @property
    def ended(self) -> bool:
        return self.state in ENDED


def job_state(job_id: str) -> JobState:
    """What Slurm says of a job now."""
    fields = job_fields(job_id)
    state = fields.get("JobState", "UNKNOWN")
    code = fields.get("ExitCode", "")
    exit_code = int(code.split(":")[0]) if state in ENDED and code.split(":")[0].isdigit() else None
    return JobState(state, exit_code)


async def follow(
    job_id: str, say: Callable[[str], None], poll_s: float = 1.0, until: Callable[[JobState], bool] | None = None
) -> JobState:
    """The job's state, said at each change, until it ends (or ``until`` holds of it first)."""
    last = ""
    while True:
        found = job_state(job_id)
        if found.state != last:
            say(f"job {job_id}: {found.state}")
            last = found.state
        if found.ended or (until is not None and until(found)):
            return found
        await asyncio.sleep(poll_s)


def job_now(job_id: str) -> str:
    """A job's state and exit code as Slurm says them now (``COMPLETED, exit code 0:0``); one it no longer holds
    (ended over MinJobAge ago) said so. SchedulerError where Slurm cannot be asked."""
    try:
        fields = job_fields(job_id)
    except SchedulerError as exc:
        if "Invalid job id" not in str(exc):
            raise
        return "ended, and no longer held by Slurm"
    state, code = fields.get("JobState", "UNKNOWN"), fields.get("ExitCode", "")
    return f"{state}, exit code {code or 'none yet'}"


async def end_hold(job: str, say: Callable[[str], None], poll_s: float = 0.5) -> JobState:
    """The hold job cancelled (the chain's nodes let go, production free to run) and waited to its end; one that
    already ended, or that Slurm no longer holds, is left."""
    try:
        found = job_state(job)
    except SchedulerError as exc:
        if "Invalid job id" not in str(exc):
            raise
        return JobState("ENDED")
    if not found.ended:
        slurm("scancel", job)
        say(f"job {job}: cancelled, the chain's nodes let go")
    while not found.ended:
        await asyncio.sleep(poll_s)
        found = job_state(job)
    return found
