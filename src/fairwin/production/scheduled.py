"""Production as a Slurm job (``[production] slurm_job``): Slurm takes it down and gives it back; fairwin proves both.

Down: when the window's exclusive job starts on production's node, a cluster that preempts with requeue has
already sent production's job back to the queue (``PENDING``, held by Slurm's requeue delay); where it does not
preempt, ``fairwin submit`` requeues it (``scontrol requeue``) so that the window's job can start. Either way the
window finds production's job running on none of its nodes, and then proves the port refusing as for any
production.

Back: production's job can run again only once the window's job has ended, so inside the window the restore
releases the requeue hold (``scontrol update StartTime=now``: without it Slurm waits about two minutes more) and
records production as RETURNING. After the job (``fairwin submit``'s follow, or ``fairwin recover``) fairwin waits
for Slurm to run the job again, proves it healthy and watches it, as for any restore.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from fairwin.errors import ProductionError, SchedulerError
from fairwin.launch.scheduler import ENDED, hostnames, job_fields, slurm

POLL_S = 0.5
#: States in which the job holds no node and will run again (squeue's long names).
WAITING = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED"})


@dataclass(frozen=True)
class SeenJob:
    """What Slurm says of production's job now."""

    job_id: str
    name: str
    state: str
    reason: str
    nodes: tuple[str, ...]
    requeue: bool
    restarts: int

    def said(self) -> str:
        on = f" on {','.join(self.nodes)}" if self.nodes else ""
        restarted = f"restarted {self.restarts} time(s)"
        return f"Slurm job {self.job_id} ({self.name}) {self.state}{on} ({self.reason}), {restarted}"


class ScheduledProduction:
    """Production's job, found by its name, and what the window's nodes are."""

    def __init__(self, name: str, window_nodes: list[str]) -> None:
        self.name = name
        self.window_nodes = window_nodes

    def seen(self) -> SeenJob:
        """The one job of that name Slurm holds (running or waiting); ProductionError where none or several."""
        ids = slurm("squeue", "-h", "--name", self.name, "-o", "%i").split()
        if len(ids) != 1:
            found = f"{len(ids)} jobs ({', '.join(ids)})" if ids else "no job"
            raise ProductionError(
                f"production's Slurm job {self.name!r}: Slurm holds {found} of that name; production must be one "
                "running or requeued job"
            )
        fields = job_fields(ids[0])
        return SeenJob(
            job_id=ids[0],
            name=self.name,
            state=fields.get("JobState", "UNKNOWN"),
            reason=fields.get("Reason", "None"),
            nodes=tuple(hostnames(fields.get("NodeList", ""))) if fields.get("JobState") == "RUNNING" else (),
            requeue=fields.get("Requeue") == "1",
            restarts=int(fields.get("Restarts", "0") or 0),
        )

    def on_window_nodes(self, job: SeenJob) -> bool:
        return job.state not in WAITING and bool(set(job.nodes) & set(self.window_nodes))

    async def take_down(self, timeout_s: float) -> str:
        """Production's job off the window's nodes: found preempted (or requeued by submit), or requeued now where
        it still runs there (a node the cluster shares); refused where Slurm would not run it again."""
        deadline = time.monotonic() + timeout_s
        job = await asyncio.to_thread(self.seen)
        while job.state not in WAITING and job.state != "RUNNING":  # COMPLETING after its preemption: on its way
            if job.state in ENDED or time.monotonic() >= deadline:
                raise ProductionError(
                    f"{job.said()}: neither running nor waiting to run again; Slurm will not give it back (submit "
                    "production with --requeue, on a partition or QOS that preempts with REQUEUE)"
                )
            await asyncio.sleep(POLL_S)
            job = await asyncio.to_thread(self.seen)
        if not job.requeue:
            raise ProductionError(
                f"{job.said()} cannot be requeued: Slurm would not give it back after the window; submit production "
                "with --requeue, on a partition or QOS that preempts with REQUEUE"
            )
        if not self.on_window_nodes(job):
            if job.state not in WAITING:
                raise ProductionError(
                    f"{job.said()} runs on none of the window's nodes ({','.join(self.window_nodes)}): it is not the "
                    "production this window's hardware serves"
                )
            return f"taken down by Slurm: {job.said()}"
        await asyncio.to_thread(self.requeue, job)
        while self.on_window_nodes(now := await asyncio.to_thread(self.seen)):
            if time.monotonic() >= deadline:
                raise ProductionError(f"{now.said()} still runs {timeout_s:g} s after scontrol requeue")
            await asyncio.sleep(POLL_S)
        return f"requeued by fairwin (scontrol requeue): {now.said()}"

    def requeue(self, job: SeenJob | None = None) -> str:
        """Production's job sent back to the queue where it runs on one of the window's nodes (a cluster that does
        not preempt: ``fairwin submit`` does this once the window's job waits for the node)."""
        job = job or self.seen()
        if not self.on_window_nodes(job):
            return f"{job.said()}: not on the window's nodes, left as it is"
        slurm("scontrol", "requeue", job.job_id)
        return f"{job.said()}: requeued (scontrol requeue) so that the window's job can start"

    def release(self) -> str:
        """Production's job free to run the moment the window's job ends (its requeue delay lifted)."""
        job = self.seen()
        if job.state not in WAITING:
            return f"{job.said()}: nothing to release"
        slurm("scontrol", "update", f"JobId={job.job_id}", "StartTime=now")
        return f"{job.said()}: released to run when the window's job ends (StartTime=now)"

    async def running(self, timeout_s: float) -> SeenJob:
        """Production's job once Slurm runs it again (its requeue hold lifted where it still waits on it)."""
        deadline = time.monotonic() + timeout_s
        released = False
        while True:
            try:
                job = await asyncio.to_thread(self.seen)
            except (ProductionError, SchedulerError) as exc:
                raise ProductionError(f"Slurm does not give production back: {exc}") from None
            if job.state == "RUNNING":
                return job
            if not released and job.reason == "BeginTime":
                await asyncio.to_thread(self.release)
                released = True
            if time.monotonic() >= deadline:
                raise ProductionError(f"{job.said()}: Slurm has not run it again {timeout_s:g} s on")
            await asyncio.sleep(POLL_S)
