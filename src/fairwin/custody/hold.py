"""A window's hold on production's hardware: production taken down, the hardware proved quiet, given back.

The window calls these as journaled steps: ``take_down`` after open, ``prove_quiet``
before the first start and after the last, ``give_back`` (restore, then the watch) once
the starts are done, and, from its close, ``give_back`` again whenever production was
taken and not yet given back (a failed start, Ctrl-C, SIGTERM). A restore that does not
come back healthy, or whose watch fails, is RESTORE FAILED: exit 6.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
from pydantic import BaseModel, ConfigDict

from fairwin.directory.declaration import ProductionDeclaration
from fairwin.directory.status import Restore, UpRecord
from fairwin.errors import InputError, LaunchError, ProductionError, RestoreFailed, SchedulerError
from fairwin.launch.remote_runs import live_runs
from fairwin.launch.runtime_cli import RuntimeCli
from fairwin.launch.shell import shell
from fairwin.launch.spec import WINDOW_LABEL, make_spec
from fairwin.plan.hosts import Host
from fairwin.plan.site import Site
from fairwin.production.control import Production
from fairwin.production.placeholder_record import RunningPlaceholder
from fairwin.production.proof import port_state
from fairwin.production.scheduled import ScheduledProduction
from fairwin.production.watch import watch
from fairwin.telemetry.gpu import HERE, ComputeProcess, GpuSource
from fairwin.transport import client_session


def fixed_role_urls(site: Site) -> list[str]:
    """Base URLs of the site's roles that answer on a fixed port: nothing may answer there between starts."""
    plan = site.plan
    return sorted(
        {
            make_spec(name, plan.roles, site.base_dir).base_url
            for name in site.roles
            if isinstance(plan.roles[name].port, int) or "{port}" not in plan.roles[name].base_url
        }
    )


class QuietProof(BaseModel):
    """The quiet step's journaled end: when the hardware was proved quiet, and the ports that refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    quiet: str  # "before s1", "after s5"
    ports_refusing: list[str]
    gpus_read: dict[str, list[str]] = {}  # by host ('here' for fairwin's own): the GPUs whose processes were read
    gpus_unread: list[str] = []  # hosts whose GPUs nothing reads (a CPU plan's, or accepted by the plan)


@dataclass
class Hold:
    production: Production
    quiet_urls: list[str]
    say: Callable[[str], None]
    taken: bool = False
    restored: Restore | None = None
    snapshot: ProductionDeclaration | None = None
    gpu: GpuSource | None = None  # where telemetry exists, the quiet proof also reads the GPUs' compute processes
    containers: list[RuntimeCli] = field(default_factory=list)  # the engines the window's containers run on
    hosts: dict[str, Host] = field(default_factory=dict)  # the hosts the window's servers run on, over SSH
    tolerated: list[RunningPlaceholder] = field(default_factory=list)  # placeholders already holding the hardware
    gpus_unread: list[str] = field(default_factory=list)  # hosts the quiet proof cannot read the GPUs of
    #: The Slurm job the window runs in: production run by Slurm can only come back once it has ended.
    window_job: str | None = None

    @property
    def owed(self) -> bool:
        """Production was taken down (or its take-down began) and has not been given back."""
        return self.taken and self.restored is None

    async def take_down(self) -> UpRecord:
        self.taken = True  # set before acting: a take-down that fails halfway is given back too
        proved = await self.production.take_down()
        self.say(f"production down: {proved.how}; {proved.proof} ({proved.seconds:.1f} s)")
        return proved.record()

    async def prove_quiet(self, when: str) -> QuietProof:
        problems = await self.production.down_problems()
        problems += [f"{url} accepts connections" for url in self.quiet_urls if port_state(url) == "open"]
        read = await self._gpus_read(problems)
        problems += await self._gpu_problems()
        problems += await self._container_problems()
        problems += await self._remote_run_problems()
        if problems:
            raise ProductionError(f"the hardware is not quiet {when}: {'; '.join(problems)}")
        return QuietProof(
            quiet=when,
            ports_refusing=[self.production.base_url, *self.quiet_urls],
            gpus_read=read,
            gpus_unread=self.gpus_unread,
        )

    async def _gpus_read(self, problems: list[str]) -> dict[str, list[str]]:
        """Which GPUs the proof reads, by host: a source that answers no GPU proves nothing quiet."""
        if self.gpu is None:
            return {}
        try:
            samples = await asyncio.to_thread(self.gpu.sample)
        except (InputError, OSError) as exc:
            problems.append(f"the GPUs could not be read: {exc}")
            return {}
        read: dict[str, list[str]] = {}
        for sample in samples:
            read.setdefault(sample.host or HERE, []).append(sample.uuid or str(sample.gpu))
        if not read:
            problems.append(f"{self.gpu.name} answered, but listed no GPU")
        return read

    async def _gpu_problems(self) -> list[str]:
        """Compute processes on the GPUs: between starts nothing may run there (none read: none reported)."""
        if self.gpu is None:
            return []
        try:
            found = await asyncio.to_thread(self.gpu.compute_processes)
        except (InputError, OSError) as exc:
            return [f"the GPUs' compute processes could not be read: {exc}"]
        found = [p for p in found if not await self._a_placeholder(p)]
        return [f"pid {p.pid} ({p.name or 'unnamed'}) computes on GPU {p.gpu_uuid}" for p in found]

    async def _a_placeholder(self, process: ComputeProcess) -> bool:
        """The GPU process runs in a placeholder's process group on its host (a chain's placeholders start before
        the last servers stop, and the quiet proof after them must not count them)."""
        host = process.host
        holders = {p.pid for p in self.tolerated if p.pid is not None and (p.host or HERE) == (host or HERE)}
        if not holders:
            return False
        pid = process.pid
        if host in (None, HERE):
            try:
                return pid in holders or os.getpgid(pid) in holders
            except OSError:
                return False
        code, out = await shell(str(host), self.hosts.get(str(host)), f"ps -o pgid= -p {pid}", retry="read")
        return pid in holders or (code == 0 and out.strip().isdigit() and int(out) in holders)

    async def _container_problems(self) -> list[str]:
        """A container fairwin started (any window's: its own are stopped between starts) still runs on an engine
        the window's containers use; an engine that cannot be asked is a problem too."""
        problems = []
        for cli in self.containers:
            try:
                names = await cli.labelled(WINDOW_LABEL, running_only=True)
            except LaunchError as exc:
                problems.append(str(exc))
                continue
            problems += [f"container {name} of a fairwin window runs{cli.where}" for name in names]
        return problems

    async def _remote_run_problems(self) -> list[str]:
        """A server fairwin launched on one of the window's hosts (any window's, by its run directory) still runs;
        a host whose run directories cannot be read is a problem too."""
        problems = []
        for name, host in self.hosts.items():
            try:
                problems += [
                    f"server {run} of a fairwin window runs on host {name}" for run in await live_runs(name, host)
                ]
            except LaunchError as exc:
                problems.append(str(exc))
        return problems

    async def give_back(self) -> Restore:
        """Restore production and watch it; RestoreFailed (after recording why) when it does not hold. Production
        that Slurm runs, inside the window's own job: handed back to Slurm, RETURNING until proved after the job."""
        if self.production.scheduled is not None and self.window_job is not None:
            return await self._hand_to_slurm(self.production.scheduled)
        timeout = aiohttp.ClientTimeout(total=None)
        async with client_session(timeout, self.production.headers) as session:
            try:
                proved = await self.production.bring_up(session)
            except ProductionError as exc:
                self.restored = Restore(state="RESTORE FAILED", reason=str(exc))
                raise RestoreFailed(f"RESTORE FAILED: {exc}") from None
            watched = await watch(self.production, session)
        restored = Restore(
            state="RESTORED" if watched.ok else "RESTORE FAILED",
            up=proved.record(),
            watch=watched.record(),
            reason=None if watched.ok else watched.summary(),
        )
        self.restored = restored
        self.say(f"production {restored.state}: {proved.how} ({proved.seconds:.1f} s); {watched.summary()}")
        if not watched.ok:
            raise RestoreFailed(f"RESTORE FAILED: production came up but the {watched.summary()}")
        return restored

    async def _hand_to_slurm(self, scheduled: ScheduledProduction) -> Restore:
        """Production's requeue hold lifted, so that Slurm runs it the moment the window's job ends; its return is
        proved after that (``fairwin submit``'s follow, or ``fairwin recover``)."""
        try:
            released = await asyncio.to_thread(scheduled.release)
        except (ProductionError, SchedulerError) as exc:
            released = f"its requeue hold was not lifted ({exc}); Slurm runs it after its requeue delay"
        self.restored = Restore(
            state="RETURNING",
            reason=f"Slurm runs production again when window job {self.window_job} ends: {released}",
        )
        self.say(f"production RETURNING: {self.restored.reason}")
        return self.restored

    def line(self) -> str:
        """The restore, in one line, for the summary."""
        if self.restored is None:
            return "production: still down (not given back)"
        if self.restored.state == "CHAINED":
            return f"production: CHAINED: {self.restored.reason} for the chain's next window"
        if not self.restored.restored:
            return f"production: **{self.restored.state}**: {self.restored.reason or ''}"
        up, held = self.restored.up, self.restored.watch
        if up is None or held is None:  # a restore is RESTORED only once both were recorded
            return "production: RESTORED"
        return (
            f"production: RESTORED ({up.how}, healthy after {up.seconds:.1f} s); watch held "
            f"{held.seconds:.1f} s, {held.answered} of {held.requests} requests answered"
        )
