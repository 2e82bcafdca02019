"""Taking production down and bringing it back, each proved.

A production **role** is launched detached, here or on its role's host over SSH:
``setsid --fork`` makes it the leader of a session of its own whose parent is init, so
it outlives fairwin (a window that ends, fairwin killed, an ssh session lost) and is
never fairwin's zombie. Its pid goes to
``state_dir/production.json`` the moment it exists; taking it down signals its whole
process group, SIGTERM then SIGKILL, after checking that pid still runs the recorded
command (a pid can be reused). Production **managed elsewhere** runs the plan's ``up``
and ``down`` commands. Either way, up is proved by the health path answering 200 and
down by the port refusing connections with none of ``must_not_run`` running.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from fairwin.directory.declaration import ProductionDeclaration
from fairwin.directory.status import UpRecord
from fairwin.errors import InputError, ProductionError
from fairwin.files import sha256_bytes
from fairwin.launch.listeners import held_here
from fairwin.launch.spec import LaunchSpec, make_spec
from fairwin.plan.production import ProductionSettings
from fairwin.plan.site import Site
from fairwin.production import boxed
from fairwin.production.proof import host_port, port_state
from fairwin.production.scheduled import ScheduledProduction
from fairwin.production.state_records import ProductionState
from fairwin.production.where import Here, OverSsh, Where
from fairwin.records import read_record, write_record
from fairwin.redaction import argv_matches, scrub_file
from fairwin.transport import api_headers

POLL_S = 0.1
COMMAND_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Proved:
    """What an up or down did and how it was proved."""

    action: str  # "up" | "down"
    how: str  # "launched pid N" / "stopped pid N (SIGTERM)" / "ran: CMD" / "already down"
    proof: str
    seconds: float

    def record(self) -> UpRecord:
        return UpRecord(action=self.action, how=self.how, proof=self.proof, seconds=round(self.seconds, 3))


def snapshot(site: Site) -> ProductionDeclaration:
    """The plan's production declaration (argv, env, env files' digests; or up/down) with its sha256."""
    settings = site.plan.production
    if settings is None:
        raise InputError(f"{site.path} has no [production] section; see docs/production.md")
    if settings.role is not None:
        spec = make_spec(settings.role, site.plan.roles, site.base_dir, site.places)
        role = site.plan.roles[settings.role]
        declared: dict[str, Any] = {
            "role": settings.role,
            "argv": spec.shown_argv,
            "env": spec.shown_env,
            "env_files": spec.env_files,
            "base_url": settings.base_url or spec.base_url,
        }
        if role.host is not None:  # only then: a production here keeps the sha256 it always had
            declared["host"] = role.host
        if role.container is not None:  # likewise: only a container production's declaration names its container
            declared["container"] = role.container.model_dump(mode="json")
    elif settings.slurm_job is not None:
        declared = {"slurm_job": settings.slurm_job, "base_url": settings.base_url}
    else:
        declared = {"up": settings.up, "down": settings.down, "base_url": settings.base_url}
    return ProductionDeclaration.of(**declared)


def plan_slot(plan: Path) -> str:
    """A plan's own production state in a shared output directory: its file's name and a digest of its path, so
    two plans writing their windows to one directory never read each other's production."""
    return f"{plan.stem}-{sha256_bytes(str(plan.resolve()).encode())[:8]}"


class Production:
    """Production as the plan declares it; ``state_dir`` keeps the pid of a production fairwin launched."""

    def __init__(self, site: Site, output_dir: Path) -> None:
        settings = site.plan.production
        if settings is None:
            raise InputError(f"{site.path} has no [production] section; see docs/production.md")
        self.settings: ProductionSettings = settings
        self.site = site
        self.spec: LaunchSpec | None = (
            make_spec(settings.role, site.plan.roles, site.base_dir, site.places) if settings.role is not None else None
        )
        if self.spec is not None and self.spec.container is not None:
            self.spec = boxed.production_spec(self.spec)
        role = site.plan.roles[settings.role] if settings.role is not None else None
        self.base_url = settings.base_url or (self.spec.base_url if self.spec else "")
        self.health_url = self.base_url + (settings.health_path or (role.health_path if role else "/health"))
        self.model = settings.model or (role.served_model if role else "")
        key_env = settings.api_key_env or (role.api_key_env if role else None)
        self.headers = api_headers(
            key_env, "production.api_key_env" if settings.api_key_env else "its role's api_key_env"
        )
        state = settings.state_dir or output_dir / ".production" / plan_slot(site.path)
        self.state_dir = state if state.is_absolute() else site.base_dir / state
        self.state_file = self.state_dir / "production.json"
        # Where a fairwin before per-plan state kept it: adopted when it is this plan's production (its argv).
        self.shared_state_file = output_dir / ".production" / "production.json" if not settings.state_dir else None
        self.where: Where = Here(self.state_dir)
        if (host := role.host if role is not None else settings.host) is not None:
            remote = site.host(host)
            self.where = OverSsh(host, remote, settings.remote_dir)
        cluster = site.plan.cluster
        self.scheduled: ScheduledProduction | None = None
        if settings.slurm_job is not None and cluster is not None:  # the plan requires [cluster] beside it
            self.scheduled = ScheduledProduction(settings.slurm_job, cluster.nodes)

    def snapshot(self) -> ProductionDeclaration:
        """Production's declaration as it is now, with its sha256: what a window restores, recorded at open."""
        return snapshot(self.site)

    # -- state -----------------------------------------------------------------------------------

    async def healthy(self, session: aiohttp.ClientSession) -> bool:
        try:
            async with session.get(self.health_url, timeout=aiohttp.ClientTimeout(total=2.0)) as response:
                return response.status == 200
        except (TimeoutError, aiohttp.ClientError):
            return False

    async def down_problems(self) -> list[str]:
        """Why production is not proved down: its port does not refuse, or a must-not-run process runs (on its
        host, over SSH, when it has one)."""
        problems = []
        state = port_state(self.base_url)
        if state != "refused":
            problems.append(f"{self.base_url} {'accepts connections' if state == 'open' else 'does not refuse'}")
        found = await self.where.running(self.settings.must_not_run)
        problems += [f"still running{self.where.label}: {p}" for p in found]
        return problems

    # -- down ------------------------------------------------------------------------------------

    async def take_down(self) -> Proved:
        started = time.monotonic()
        if self.spec is not None:
            how = await self._stop_launched()
        elif self.scheduled is not None:
            how = await self.scheduled.take_down(self.settings.down_timeout_s)
        else:
            how = await self.where.run("down", self.settings.down)
        deadline = time.monotonic() + self.settings.down_timeout_s
        while problems := await self.down_problems():
            if time.monotonic() >= deadline:
                raise ProductionError(
                    f"production is not down {self.settings.down_timeout_s:g} s after {how}: {'; '.join(problems)}"
                )
            await asyncio.sleep(POLL_S)
        return Proved(
            "down", how, f"{self.base_url} refuses connections; none of must_not_run runs", time.monotonic() - started
        )

    @property
    def container(self) -> str | None:
        """The name of the container fairwin runs production as, when its role is a container."""
        return self.spec.container_name if self.spec is not None else None

    async def _stop_launched(self) -> str:
        if self.spec is not None and self.container is not None:
            how = await boxed.take_down(self.spec)
            self.state_file.unlink(missing_ok=True)
            return how
        recorded = await self.recorded_pid()
        if recorded is None:
            if port_state(self.base_url) == "open":
                raise ProductionError(
                    f"production answers at {self.base_url}, but fairwin has no record of starting it "
                    f"({self.state_file}); stop it yourself, or manage it with [production] up and down"
                )
            return "already down"
        pid = recorded  # launched as its own session's leader: its pid is its group's id
        sent = await self.where.stop_group(pid, self.spec.stop_timeout_s if self.spec else 30.0)
        self.state_file.unlink(missing_ok=True)
        return f"stopped pid {pid}{self.where.label} ({sent})"

    async def recorded_pid(self) -> int | None:
        """The pid fairwin launched production as, if that process still runs production's command (here, or on
        its host). The launch's own pid file stands in when fairwin died between the launch and writing
        production.json. A container production: its main process while its container runs."""
        if self.spec is not None and self.container is not None:
            return await boxed.running_pid(self.spec)
        self._adopt_shared_state()
        if self.state_file.exists():
            state = read_record(self.state_file, ProductionState)
            pid, argv = state.pid, state.argv
            if not await self.where.alive(pid):
                return None
            if state.started_ticks is not None:  # the same process, never a recycled pid, even after an exec
                return pid if await self.where.started(pid) == state.started_ticks else None
            # The argv recorded is the plan's words ({env:NAME} unresolved, *** after a secret flag): it matches
            # the live command line it stands for, never a recycled pid running something else.
            return pid if argv_matches(argv, await self.where.command_of(pid)) else None
        launched = await self.where.launched_pid()
        if launched is None or self.spec is None or not await self.where.alive(launched):
            return None
        return launched if await self.where.command_of(launched) == self.spec.argv else None

    def _adopt_shared_state(self) -> None:
        """A production launched by a fairwin that kept one state per output directory: moved into this plan's
        own state when its recorded command is this plan's production (another plan's is left where it is)."""
        shared = self.shared_state_file
        if shared is None or self.spec is None or self.state_file.exists() or not shared.is_file():
            return
        if read_record(shared, ProductionState).argv == self.spec.shown_argv:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            shared.replace(self.state_file)

    async def refuse_if_port_taken(self) -> None:
        """Before a launch: production's port must not be answered by a server fairwin did not launch as this
        plan's production (another plan's production, someone's experiment), which would be taken for it, or
        waited on until the up timeout and then blamed; refused at once, naming who holds it where fairwin can
        see."""
        if self.spec is None or port_state(self.base_url) != "open":
            return
        holder = held_here(host_port(self.base_url)[1]) if self.spec.host is None else None
        raise ProductionError(
            f"production's port is taken: {self.base_url} answers, and fairwin did not launch production there "
            f"({self.state_file} has no record of it){f'; held by {holder}' if holder else ''}; stop what holds "
            "it, or give production another port"
        )

    # -- up --------------------------------------------------------------------------------------

    async def bring_up(self, session: aiohttp.ClientSession) -> Proved:
        started = time.monotonic()
        launched = await self.recorded_pid() if self.spec is not None else None
        if self.spec is not None and launched is None:
            await self.refuse_if_port_taken()  # a server fairwin did not launch is never taken for production
        # Slurm's production: its job running again on its node is the proof, before whatever answers its port.
        if self.scheduled is None and await self.healthy(session):
            return Proved("up", "already up", f"{self.health_url} answers 200", time.monotonic() - started)
        if self.scheduled is not None:
            job = await self.scheduled.running(self.settings.up_timeout_s)
            how = f"run again by Slurm: {job.said()}"
        elif self.spec is None:
            how = await self.where.run("up", self.settings.up)
        elif launched is not None:  # launched already (a restore cut short): not twice
            how = f"pid {launched}, launched earlier"
        else:
            how = await self._launch()
        deadline = time.monotonic() + self.settings.up_timeout_s
        while not await self.healthy(session):
            pid = await self.recorded_pid() if self.spec is not None else None
            if self.spec is not None and pid is None:
                raise ProductionError(f"production exited after {how}; see {await self._log()}")
            if time.monotonic() >= deadline:
                raise ProductionError(
                    f"production is not healthy {self.settings.up_timeout_s:g} s after {how} ({self.health_url})"
                )
            await asyncio.sleep(POLL_S)
        if self.spec is not None and self.container is None and not isinstance(self.where, OverSsh):
            scrub_file(self.state_dir / "production.log")  # what it printed while starting (vLLM prints its args)
        return Proved("up", how, f"{self.health_url} answers 200", time.monotonic() - started)

    async def _launch(self) -> str:
        assert self.spec is not None
        if self.container is not None:
            box = await boxed.launch(self.spec)
            pid = box.pid or 0
        else:
            pid = await self.where.launch(self.spec.argv, self.spec.declared_env, self.spec.env, self.spec.cwd)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        launched = ProductionState(
            pid=pid,
            argv=self.spec.shown_argv,
            host=self.spec.host,
            started_unix=time.time(),
            snapshot=self.snapshot(),
            started_ticks=await self.where.started(pid) if self.container is None else None,
            container=self.container,
        )
        write_record(self.state_file, launched)
        if self.container is not None:
            return f"launched container {self.container} (pid {pid}){self.where.label}"
        return f"launched pid {pid}{self.where.label}"

    async def _log(self) -> str:
        if self.spec is not None and self.container is not None:
            return f"its container's last line: {await boxed.log_tail(self.spec)!r}"
        return self.log_on_host() + (self.where.label if isinstance(self.where, OverSsh) else "")

    def log_on_host(self) -> str:
        """The launched production's log, as a path on its own host."""
        if isinstance(self.where, OverSsh):
            return f"{self.where.dir}/production.log"
        return str(self.state_dir / "production.log")
