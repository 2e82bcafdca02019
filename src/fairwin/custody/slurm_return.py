"""After a window's Slurm job: production that the window handed back to Slurm (RETURNING) proved back.

Production run as a Slurm job can only run again once the window's job has ended, so the window itself cannot
prove its return. ``fairwin submit``'s follow does, the moment the job ends, and ``fairwin recover`` does for any
window of the output directory still RETURNING: wait for Slurm to run production's job again, prove it healthy,
watch it as every restore is watched, and write the outcome into the window's receipts (its journal's ``return``
step, and ``restore`` in status.json: RESTORED or RESTORE FAILED, with how long after the window's job ended
production answered).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

from fairwin.custody.hold import Hold
from fairwin.custody.slurm_job import HOLD_NAME, end_hold, job_now
from fairwin.directory.layout import WindowDir
from fairwin.directory.manifest import WindowManifest
from fairwin.directory.status import Restore, SlurmReturn, WindowStatus
from fairwin.errors import InputError, RestoreFailed, SchedulerError
from fairwin.launch.scheduler import ENDED, job_fields
from fairwin.plan.loading import parse_window_plan
from fairwin.plan.site import Site
from fairwin.production.control import Production
from fairwin.records import read_record

RETURN_STEP = "return"


def _window_jobs(output_dir: Path) -> Iterator[tuple[Path, str]]:
    """Each window of the output directory that ran in a Slurm job, the latest first: its directory and the job
    its window.json records (an unreadable one skipped)."""
    for manifest in sorted(output_dir.glob("*/window.json"), reverse=True) if output_dir.is_dir() else []:
        try:
            found = read_record(manifest, WindowManifest)
        except InputError:
            continue
        if found.cluster is not None:
            yield manifest.parent, found.cluster.job_id


def window_of_job(output_dir: Path, job_id: str) -> WindowDir | None:
    """The last window a Slurm job ran, by the job its window.json records (a chain's hold job runs several, the
    last one the one that ended the chain); None where it opened none (refused)."""
    return next((WindowDir.at(path) for path, job in _window_jobs(output_dir) if job == job_id), None)


def returning(directory: WindowDir) -> str | None:
    """The window's job when production was handed to Slurm and its return is not proved yet."""
    try:
        status = read_record(directory.status, WindowStatus)
        manifest = read_record(directory.manifest, WindowManifest)
    except InputError:
        return None
    if status.restore is None or status.restore.state != "RETURNING" or manifest.cluster is None:
        return None
    return manifest.cluster.job_id


def _ended_at(job_id: str) -> tuple[str, float | None]:
    """Slurm's EndTime of the window's job (its words, and as a Unix time); unknown once Slurm forgot the job."""
    try:
        said = job_fields(job_id).get("EndTime", "Unknown")
    except SchedulerError:
        return "Unknown", None
    try:
        return said, datetime.strptime(said, "%Y-%m-%dT%H:%M:%S").timestamp()  # slurmctld's local time
    except ValueError:
        return said, None


async def prove_return(site: Site, directory: WindowDir, output_dir: Path, say: Callable[[str], None]) -> Restore:
    """Production back from Slurm after the window's job, proved and watched, written into the window's receipts.
    Production as the window's own copy of the plan declared it."""
    job = returning(directory)
    if job is None:
        raise InputError(f"{directory.path}: production is not RETURNING from Slurm; nothing to prove")
    production = Production(Site.at(parse_window_plan(directory), site.path), output_dir)
    hold = Hold(production, [], say, taken=True)
    directory.journal_event(RETURN_STEP, "begin", window_job=job)
    cancelled = {"hold_job_cancelled": job} if await _chain_over(job, say) else {}
    began = time.time()
    with contextlib.suppress(RestoreFailed):  # recorded in hold.restored, and written below
        await hold.give_back()
    assert hold.restored is not None  # give_back records what it found, held or not
    ended, ended_unix = _ended_at(job)
    up = hold.restored.up  # answered health ``up.seconds`` after the proof began (the watch came after)
    after = round(began + up.seconds - ended_unix, 1) if ended_unix is not None and up is not None else None
    restored = hold.restored.model_copy(
        update={"slurm": SlurmReturn(window_job=job, job_ended=ended, answered_after_s=after)}
    )
    directory.journal_event(RETURN_STEP, "end", **restored.model_dump(mode="json"), **cancelled)
    directory.amend_status(restore=restored)
    return restored


async def _chain_over(job: str, say: Callable[[str], None]) -> bool:
    """A chain's hold job that still holds the nodes once its last window handed production back (its follow was
    cut): ended, so that Slurm can run production again (True). A window's own job is left to end by itself."""
    try:
        fields = job_fields(job)
    except SchedulerError:
        return False  # Slurm no longer holds it: it ended
    if fields.get("JobName") != HOLD_NAME or fields.get("JobState") in ENDED:
        return False
    await end_hold(job, say)
    return True


async def end_ended_chains(output_dir: Path, chain_job: str | None, say: Callable[[str], None]) -> list[str]:
    """Every chain's hold job that the output directory's windows ran in and that still holds its nodes, though
    its chain ended (``chain_job``: the one a chain in progress still holds, left alone): ended, so that Slurm can
    give the nodes back; a chain whose last window restored production itself leaves nothing RETURNING to find
    them by. The jobs ended."""
    jobs = {job for _, job in _window_jobs(output_dir)} - {chain_job}
    return [job for job in sorted(jobs) if await _chain_over(job, say)]


async def prove_returns(site: Site, output_dir: Path, say: Callable[[str], None]) -> list[tuple[str, Restore]]:
    """Every window of ``output_dir`` still RETURNING, proved back (each window's id, and its restore)."""
    proved = []
    for status in sorted(output_dir.glob("*/status.json")) if output_dir.is_dir() else []:
        directory = WindowDir.at(status.parent)
        if returning(directory) is not None:
            proved.append((directory.window_id, await prove_return(site, directory, output_dir, say)))
    return proved


async def after_job(site: Site, output_dir: Path, job_id: str, say: Callable[[str], None]) -> Restore | None:
    """What ``fairwin submit`` does once the window's job ended: production's return proved when the window handed
    it to Slurm (None where it did not: no production, refused, or given back by fairwin itself)."""
    directory = window_of_job(output_dir, job_id)
    if directory is None or returning(directory) is None:
        return None
    say(f"job {job_id} ended; waiting for Slurm to run production again")
    restored = await prove_return(site, directory, output_dir, say)
    answered = restored.slurm.answered_after_s if restored.slurm is not None else None
    when = f", answering {answered:g} s after job {job_id} ended" if answered is not None else ""
    say(f"production {restored.state}{when}" + (f": {restored.reason}" if restored.reason else ""))
    return restored


def standing(directory: WindowDir) -> list[str]:
    """Where a window stands, in lines: its state (and verdict), production's custody, and its Slurm job's state
    now (``fairwin status``). SchedulerError where Slurm cannot be asked of a window that ran as a job."""
    status = read_record(directory.status, WindowStatus)
    manifest = read_record(directory.manifest, WindowManifest)
    lines = [f"window {status.window_id}: {status.state}" + (f", {status.verdict}" if status.verdict else "")]
    if (restore := status.restore) is not None:
        back = restore.slurm
        after = (
            ""
            if back is None or back.answered_after_s is None
            else (f", answering {back.answered_after_s:g} s after window job {back.window_job} ended")
        )
        lines.append(f"production: {restore.state}{after}" + (f": {restore.reason}" if restore.reason else ""))
    if manifest.cluster is not None:
        lines.append(_job_line(manifest.cluster.job_id, manifest.cluster.nodes))
    return lines


def _job_line(job: str, nodes: list[str]) -> str:
    """The window's job as Slurm says it now."""
    return f"Slurm job {job} on {','.join(nodes)}: {job_now(job)}"
