"""A chain on a Slurm cluster (docs/cluster.md): one allocation, the chain's **hold job**, holds its nodes from its
first window to its last, and each window runs as a step of it (``srun --jobid``), so that Slurm never gives them
to another job between two of them (production's own, where production is a Slurm job).

``fairwin submit --chain`` queues the hold job for a new chain (an exclusive allocation of the plan's nodes whose
batch step starts the chain's placeholders as steps when a window asks, and otherwise waits), runs each window in
it, on the node of that batch step, and once the chain has ended (its last window, or an abort) ends the hold job
and proves production back. A window's step gets Slurm's TERM before the hold job's limit as a window job does; a
window that could run past that limit is refused before it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fairwin.commands import runner
from fairwin.custody.chain import Marker, in_progress, marker_path, read_marker
from fairwin.custody.chain_receipts import last_end, write_end
from fairwin.custody.hold import Hold
from fairwin.custody.slurm_job import HOLD_NAME, JobRequest, allocation_argv, end_hold, follow, job_state, submit
from fairwin.custody.slurm_return import after_job
from fairwin.directory.status import Restore
from fairwin.errors import GateRefused, InputError, RestoreFailed, SchedulerError
from fairwin.launch.scheduler import job_fields, slurm, srun_argv
from fairwin.plan.cluster import ClusterSettings
from fairwin.plan.site import Site
from fairwin.production.control import Production
from fairwin.production.placeholder_steps import batch_script

#: squeue's time left (``%L``): [days-][hours:]minutes:seconds.
_LEFT = re.compile(r"^(?:(?:(\d+)-)?(\d+):)?(\d+):(\d+)$")


def held_by_slurm(marker: Marker) -> list[str]:
    """Why the chain's Slurm job no longer holds its nodes (nothing: it runs, or no Slurm job holds the chain)."""
    job_id = marker.slurm_job
    if job_id is None:
        return []
    try:
        found = job_state(job_id)
    except SchedulerError as exc:
        return [f"the chain's Slurm job {job_id} cannot be read: {exc}"]
    if found.state != "RUNNING":
        return [
            f"the chain's Slurm job {job_id}, which holds its nodes, is {found.state}: Slurm may have run other jobs "
            "there (production's own, where it is one)"
        ]
    return []


def runs_in_chain_job(marker: Marker, job_id: str | None) -> list[str]:
    """A window continuing a chain whose nodes a Slurm job holds must run in that job."""
    if marker.slurm_job is None or job_id == marker.slurm_job:
        return []
    where = f"Slurm job {job_id}" if job_id else "no Slurm job"
    return [
        f"the chain's nodes are held by Slurm job {marker.slurm_job}, and this window runs in {where}: run it with "
        "`fairwin submit PLAN --chain` (or --chain-last), which runs it in the chain's job"
    ]


def step_argv(job: str, node: str, name: str, signal_lead_s: int, command: Sequence[str]) -> list[str]:
    """``srun`` for one window as a step of the chain's hold job, on its first node, told to close ``signal_lead_s``
    before the job's limit."""
    return srun_argv(job, node, command, name=name, flags=[f"--signal=TERM@{signal_lead_s}", "--kill-on-bad-exit=1"])


async def wait_running(job: str, say: Callable[[str], None], poll_s: float = 0.5) -> None:
    """Until the hold job runs (its allocation granted); SchedulerError where it ended first."""
    found = await follow(job, say, poll_s, until=lambda state: state.state == "RUNNING")
    if found.state != "RUNNING":
        raise SchedulerError(f"the chain's hold job {job} ended {found.state} before it held the nodes")


def minutes_left(job: str) -> float | None:
    """The minutes before the job's time limit, as squeue says them; None where it has none."""
    said = slurm("squeue", "-h", "-j", job, "-o", "%L").strip()
    found = _LEFT.match(said)
    if found is None:
        return None  # UNLIMITED, NOT_SET
    days, hours, minutes, seconds = (int(part or 0) for part in found.groups())
    return days * 1440 + hours * 60 + minutes + seconds / 60


async def run_step(argv: Sequence[str], output: Path, poll_s: float = 0.5) -> int:
    """The window's step, srun in a session of its own (a Ctrl-C of the follow does not cut the window; `scancel
    JOB.STEP` does), its output to ``output``; srun's exit status (the window's own)."""
    with output.open("ab") as sink:
        process = runner().spawn(argv, env=None, cwd=None, output=sink)
    while (code := process.poll()) is None:
        await asyncio.sleep(poll_s)
    return code


async def after_chain(site: Site, output_dir: Path, job: str, say: Callable[[str], None]) -> Restore | None:
    """Once the chain has ended: the hold job ended, then production proved back. Into the receipts of the window
    that handed it to Slurm; where none did (the chain aborted before its next window opened), into the chain
    ledger, as the chain's end."""
    await end_hold(job, say)
    restored = await after_job(site, output_dir, job, say)
    if restored is not None:
        return restored
    ended = last_end(output_dir)
    if ended is None or ended.restore is None or ended.restore.state != "RETURNING":
        return None
    say(f"job {job} ended; waiting for Slurm to run production again")
    hold = Hold(Production(site, output_dir), [], say, taken=True)
    with contextlib.suppress(RestoreFailed):  # recorded in hold.restored, and written below
        await hold.give_back()
    assert hold.restored is not None
    proved = f"production proved back after the chain's job {job} ended"
    reason = f"{ended.reason}; {proved}" if ended.reason else proved
    write_end(output_dir, ended.model_copy(update={"time": time.time(), "restore": hold.restored, "reason": reason}))
    return hold.restored


#: A new chain's hold job lasts this many of its first window's limits unless --hold-minutes says otherwise.
HOLD_WINDOWS = 3


@dataclass(frozen=True)
class ChainedStep:
    """One window of a Slurm chain, run: the hold job, and the window's exit status and output."""

    job: str
    code: int
    output: Path
    goes_on: bool  # the chain is CHAINED: the hold job keeps its nodes for the next window; else :func:`after_chain`


async def run_chained(
    site: Site,
    output_dir: Path,
    request: JobRequest,
    command: Sequence[str],
    say: Callable[[str], None],
    *,
    hold_minutes: int | None = None,
    after_submit: Callable[[str], None] = lambda job: None,
) -> ChainedStep:
    """One window of a chain as a step of the chain's hold job: a new chain's hold job queued first (and
    ``after_submit`` told its id), a later window's found in the chain's marker. Where the window ended the chain,
    :func:`after_chain` is owed next."""
    cluster = site.plan.cluster
    assert cluster is not None  # a Slurm production needs [cluster]
    marker = read_marker(marker_path(site, output_dir))
    if marker is None:
        job = await _new_hold(cluster, output_dir, request, hold_minutes, say, after_submit)
    elif marker.slurm_job is None:
        raise InputError(f"{in_progress(marker_path(site, output_dir), marker)}, and no Slurm job holds it: end it "
                         "with `fairwin chain abort PLAN`")  # fmt: skip
    else:
        job = marker.slurm_job
        if problems := held_by_slurm(marker):
            why = "; ".join(problems)
            raise GateRefused(f"the chain cannot continue: {why}; end it with `fairwin chain abort PLAN`")
    _fits(job, request)
    node = _batch_host(job)
    output = output_dir / f"slurm-{job}-{len(list(output_dir.glob(f'slurm-{job}-*.out'))) + 1}.out"
    say(f"window: a step of job {job} on {node}; output {output}")
    code = await run_step(step_argv(job, node, HOLD_NAME + "-window", request.signal_lead_s, command), output)
    after = read_marker(marker_path(site, output_dir))
    if after is not None and after.slurm_job == job:
        left = minutes_left(job)
        said = f" ({left:.0f} min left)" if left is not None else ""
        say(f"chain: job {job} holds {cluster.wanted} for the chain's next window{said}")
        return ChainedStep(job, code, output, goes_on=True)
    return ChainedStep(job, code, output, goes_on=False)


async def _new_hold(
    cluster: ClusterSettings,
    output_dir: Path,
    request: JobRequest,
    hold_minutes: int | None,
    say: Callable[[str], None],
    after_submit: Callable[[str], None],
) -> str:
    """The hold job of a new chain, queued and running; cancelled again where it never held the nodes."""
    minutes = hold_minutes or HOLD_WINDOWS * request.time_limit_min
    if minutes < request.time_limit_min:
        raise InputError(f"--hold-minutes {minutes} is shorter than this window's limit ({request.time_limit_min} "
                         "min); hold the chain's nodes for at least that")  # fmt: skip
    argv = allocation_argv(cluster, HOLD_NAME, minutes, output_dir / "slurm-%j.out")
    job = submit([*argv, "--wrap", batch_script(output_dir)])
    say(f"submitted Slurm job {job} to hold the chain's nodes {cluster.wanted}: limit {minutes} min")
    try:
        after_submit(job)
        await wait_running(job, say)
    except BaseException:
        with contextlib.suppress(SchedulerError):
            await asyncio.shield(end_hold(job, say))
        raise
    return job


def _batch_host(job: str) -> str:
    """The node the hold job's batch step runs on: each window of the chain runs there too, beside the FIFO that
    batch step reads placeholder requests from (production/placeholder_steps.py)."""
    node = job_fields(job).get("BatchHost", "")
    if not node or node == "(null)":
        raise SchedulerError(f"Slurm names no batch host for the chain's job {job}")
    return node


def _fits(job: str, request: JobRequest) -> None:
    """A window that could run past the hold job's limit is refused before it starts (Slurm would end it there)."""
    left = minutes_left(job)
    if left is not None and left < request.time_limit_min:
        raise GateRefused(
            f"the chain's Slurm job {job} holds its nodes {left:.0f} min more, and this window may take up to "
            f"{request.time_limit_min}: end the chain (`fairwin chain abort PLAN`), or start it again with a longer "
            "--hold-minutes"
        )
