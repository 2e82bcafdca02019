"""Placeholders: the commands that hold the hardware while a chain leaves production down.

A placeholder here runs detached (production/detached.py). One on a ``[hosts.NAME]``
runs there in tmux, as the runbook's do: a detached session ``fairwin-hold-NAME`` on
the host's default tmux socket, or on the one ``tmux_socket`` names; tmux keeps it
after the SSH login ends, and the session's pane is the command itself. Either way what
was started (name, host, pid, argv, the tmux session) goes into the chain's marker, and
the next window proves each still runs its command, on its own host, before it takes
them down. A placeholder is proved running only when it is still alive ``settle_s``
after its start. In a chain on Slurm, one here or on a ``[cluster] hosts`` node runs
as a step of the chain's hold job instead (production/placeholder_steps.py).
"""

from __future__ import annotations

import asyncio
import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from fairwin.commands import Retry
from fairwin.errors import LaunchError, ProductionError
from fairwin.launch.listeners import held_here
from fairwin.launch.shell import shell
from fairwin.plan.chain_settings import Placeholder
from fairwin.plan.hosts import Host
from fairwin.plan.site import Site
from fairwin.production.detached import command_of, launch_detached
from fairwin.production.placeholder_record import RunningPlaceholder
from fairwin.production.placeholder_steps import HoldSteps, left_steps, step_runs, stop_step
from fairwin.production.proof import pid_alive, stop_group

SESSION_PREFIX = "fairwin-hold-"


def _tmux(socket: str | None) -> str:
    return "tmux" + (f" -L {shlex.quote(socket)}" if socket else "")


def _session(record: RunningPlaceholder) -> str:
    return f"={record.session or SESSION_PREFIX + record.name}"  # "=": that session exactly


class Placeholders:
    """The plan's placeholders; ``state_dir`` keeps the pids and logs of those that run here. With ``steps`` (a
    window of a chain on Slurm), those here or on a bound host run as steps of the chain's hold job; with
    ``hold_job`` alone (the chain ended from outside it), its steps are found to be stopped."""

    def __init__(
        self, site: Site, state_dir: Path, steps: HoldSteps | None = None, hold_job: str | None = None
    ) -> None:
        self.declared: dict[str, Placeholder] = site.plan.chain.placeholders
        self.hosts: Mapping[str, Host] = site.hosts
        self.base_dir = site.base_dir
        self.state_dir = state_dir
        self.steps = steps
        self.hold_job = steps.job if steps is not None else hold_job  # a Slurm chain's: its placeholder steps

    async def start(self) -> list[RunningPlaceholder]:
        """Start every placeholder and prove each running on its host; any that is not is stopped with the rest,
        and raised."""
        started: list[RunningPlaceholder] = []
        try:
            for name, placeholder in self.declared.items():
                if placeholder.host in self.hosts:
                    started.append(await self._start_there(name, placeholder))
                    continue
                if placeholder.port is not None and (holder := held_here(placeholder.port)) is not None:
                    raise ProductionError(
                        f"placeholder {name}: its port {placeholder.port} here is already held by {holder}"
                    )
                if self.steps is not None:
                    started.append(await self.steps.start(name, placeholder))
                    continue
                if placeholder.host is not None:
                    raise ProductionError(
                        f"placeholder {name}: its host {placeholder.host} is a Slurm node's, and this window runs in "
                        "no chain's hold job to start it in"
                    )
                env = {**os.environ, **placeholder.env}
                pid = launch_detached(
                    placeholder.argv, env=env, cwd=self.base_dir, state_dir=self.state_dir, name=f"placeholder-{name}"
                )
                started.append(RunningPlaceholder(name=name, pid=pid, argv=placeholder.argv))
            await asyncio.sleep(max((p.settle_s for p in self.declared.values()), default=0.0))
            if problems := await self.not_running(started):
                raise ProductionError(f"placeholders are not holding the hardware: {'; '.join(problems)}")
        except BaseException:
            await self.stop(started)
            raise
        return started

    async def _start_there(self, name: str, placeholder: Placeholder) -> RunningPlaceholder:
        """A detached tmux session on its host whose pane is the command; its record, with the pane's pid."""
        host = str(placeholder.host)
        tmux, session = _tmux(placeholder.tmux_socket), SESSION_PREFIX + name
        env = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(placeholder.env.items()))
        inner = f"exec env {env} {shlex.join(placeholder.argv)}"
        script = (
            f"{tmux} has-session -t ={session} 2>/dev/null && {{ echo exists; exit 0; }}; "
            f"{tmux} new-session -d -s {session} {shlex.quote(inner)} && "
            f"{tmux} list-panes -t ={session} -F '#{{pane_pid}}'"
        )
        code, out = await self._shell(host, script, "action")
        if out.strip() == "exists":
            raise ProductionError(
                f"placeholder {name}: tmux session {session} already runs on host {host}; end it (`{tmux} "
                f"kill-session -t {session}` there) or `fairwin chain abort` the chain that left it"
            )
        pid = out.strip().splitlines()[-1] if out.strip() else ""
        if code != 0 or not pid.isdigit():
            raise ProductionError(
                f"placeholder {name} did not start in tmux on host {host} (exit {code}): {out[-200:]}"
            )
        return RunningPlaceholder(
            name=name,
            host=host,
            pid=int(pid),
            argv=placeholder.argv,
            session=session,
            tmux_socket=placeholder.tmux_socket,
        )

    async def _shell(self, host: str, command: str, retry: Retry = "read") -> tuple[int, str]:
        """The command on the placeholder's host: a read unless it says otherwise."""
        if host not in self.hosts:
            raise ProductionError(f"the placeholder's host {host} is not declared in the plan's [hosts]")
        try:
            return await shell(host, self.hosts[host], command, retry=retry)
        except LaunchError as exc:
            raise ProductionError(str(exc)) from None

    async def runs(self, record: RunningPlaceholder) -> bool:
        """The recorded placeholder still runs its command: here its pid; on a host its tmux session, whose
        pane's pid runs it."""
        pid, argv, host = record.pid, record.argv, record.host
        if record.slurm_step is not None:
            return await step_runs(record)
        if pid is None:
            return False
        if host is None:
            return pid_alive(pid) and command_of(pid)[-len(argv) :] == [str(a) for a in argv]
        tmux = _tmux(record.tmux_socket)
        code, out = await self._shell(str(host), f"{tmux} has-session -t {_session(record)} && cat /proc/{pid}/cmdline")
        running = [a for a in out.split("\0") if a]
        return code == 0 and running[-len(argv) :] == [str(a) for a in argv]

    async def not_running(self, started: list[RunningPlaceholder]) -> list[str]:
        """Why each recorded placeholder is not holding the hardware (exited, its session gone, or its pid runs
        something else; its host unreachable)."""
        problems = []
        for record in started:
            where = f" on host {record.host}" if record.host else ""
            where += f", Slurm step {record.slurm_step} on node {record.node}" if record.slurm_step else ""
            try:
                running = await self.runs(record)
            except ProductionError as exc:
                problems.append(f"{record.name}{where} could not be probed: {exc}")
                continue
            if not running:
                problems.append(f"{record.name} (pid {record.pid}){where} is not running")
        return problems

    async def stop(self, started: list[RunningPlaceholder]) -> list[str]:
        """Take down every recorded placeholder that still runs its command; what was done, one line each."""
        done = []
        unique: dict[tuple[str, str | None, int | str | None], RunningPlaceholder] = {}
        for record in started:  # the first record of each wins: a found step has no pid yet
            unique.setdefault((record.name, record.host, record.slurm_step or record.pid), record)
        for record in unique.values():
            pid, name = record.pid, record.name
            try:
                running = (pid is not None or record.slurm_step is not None) and await self.runs(record)
            except ProductionError as exc:
                done.append(f"{name}: not reached ({exc})")
                continue
            grace = self.declared[name].stop_timeout_s if name in self.declared else 10.0
            if running and record.slurm_step is not None:
                done.append(await self._stop_step(record, grace))
            elif not running or pid is None:
                done.append(f"{name}: already gone")
            elif record.host is None:
                done.append(f"{name}: stopped pid {pid} ({await stop_group(pid, pid, grace)})")
            else:
                done.append(
                    f"{name}: stopped pid {pid} on host {record.host} ({await self._stop_there(record, grace)})"
                )
        return done

    async def _stop_step(self, record: RunningPlaceholder, grace_s: float) -> str:
        """A placeholder's step cancelled; one that will not go is said so (the hold job's end takes it)."""
        step = f"Slurm step {record.slurm_step} on node {record.node}"
        try:
            return f"{record.name}: stopped {step} ({await stop_step(record, grace_s)})"
        except ProductionError as exc:
            return f"{record.name}: not stopped ({exc})"

    async def _stop_there(self, record: RunningPlaceholder, grace_s: float) -> str:
        """Its tmux session killed and its pane's group sent SIGTERM, SIGKILL after ``grace_s``."""
        pid, tmux = record.pid, _tmux(record.tmux_socket)
        assert pid is not None  # stop() stops only what it found running
        tenths = max(1, round(grace_s * 10))
        script = (
            f"{tmux} kill-session -t {_session(record)} 2>/dev/null; kill -TERM -- -{pid} 2>/dev/null; i=0; "
            f"while kill -0 {pid} 2>/dev/null && [ $i -lt {tenths} ]; do sleep 0.1; i=$((i+1)); done; "
            f"if kill -0 {pid} 2>/dev/null; then kill -KILL -- -{pid}; echo SIGKILL; else echo SIGTERM; fi"
        )
        _, out = await self._shell(str(record.host), script, "action")
        return out.strip() or "SIGTERM"

    async def stop_all(self, listed: list[RunningPlaceholder]) -> list[str]:
        """:meth:`stop` every placeholder listed and every one recorded only by its pid file or tmux session (a
        window that died while starting them leaves them so): what ends a chain, aborted or recovered."""
        return await self.stop([*listed, *(await self.recorded())])

    async def recorded(self) -> list[RunningPlaceholder]:
        """Every declared placeholder left by a window that died while starting them: here by its pid file in
        ``state_dir``, on a host by its tmux session, in a hold job by its step (whether each still runs is
        :meth:`stop`'s to check)."""
        found = await left_steps(self.hold_job, self.declared) if self.hold_job is not None else []
        for name, placeholder in self.declared.items():
            if placeholder.host in self.hosts:
                found += await self._recorded_there(name, placeholder)
                continue
            pid_file = self.state_dir / f"placeholder-{name}.pid"
            text = pid_file.read_text().strip() if pid_file.exists() else ""
            if text.isdigit():
                found.append(RunningPlaceholder(name=name, argv=placeholder.argv, pid=int(text)))
        return found

    async def _recorded_there(self, name: str, placeholder: Placeholder) -> list[RunningPlaceholder]:
        """The placeholder's tmux session on its host, if it exists: its record, with its pane's pid."""
        tmux, session = _tmux(placeholder.tmux_socket), SESSION_PREFIX + name
        try:
            code, out = await self._shell(str(placeholder.host), f"{tmux} list-panes -t ={session} -F '#{{pane_pid}}'")
        except ProductionError:
            return []
        if code != 0 or not out.strip().isdigit():
            return []
        return [
            RunningPlaceholder(
                name=name,
                argv=placeholder.argv,
                pid=int(out),
                host=placeholder.host,
                session=session,
                tmux_socket=placeholder.tmux_socket,
            )
        ]


async def not_running(site: Site, started: list[RunningPlaceholder]) -> list[str]:
    """:meth:`Placeholders.not_running` of a marker's placeholders, each probed on its own host."""
    return await Placeholders(site, Path()).not_running(started)
