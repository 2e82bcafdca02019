"""A start's processes: the role's workers, each launched and waited ready in order, then its head.

Most roles are one process, the head. A role that spans hosts (docs/hosts.md) lists
workers, launched first in the order the plan gives (the way vLLM's multi-node serving
starts: the engines, then the API server that drives them); the head is launched last
and its health URL is the role's. Every process is journaled before (``launching``,
its argv and host) and after (``launched``, its pid) its launch, so ``fairwin recover``
can stop all of them; they are stopped in reverse order, the head first, whatever
happened.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import aiohttp

from fairwin.directory.layout import WindowDir
from fairwin.directory.start_receipt import ContainerReceipt, StopRecord, WorkerReceipt
from fairwin.errors import LaunchError
from fairwin.launch.checkouts import check_checkouts, role_specs
from fairwin.launch.container import ContainerServer
from fairwin.launch.identity import digests
from fairwin.launch.launchable import launch_problems
from fairwin.launch.listeners import check_free, check_ours, listen_ports
from fairwin.launch.local import LocalServer, Note
from fairwin.launch.readiness import wait_ready
from fairwin.launch.runtime_cli import RuntimeCli
from fairwin.launch.slurm_step import SlurmStep
from fairwin.launch.spec import LaunchSpec, make_spec, worker_specs
from fairwin.plan.hosts import SlurmNode
from fairwin.plan.roles import Ready, RepoPin
from fairwin.plan.site import Site
from fairwin.production.live import LiveProduction
from fairwin.production.live_check import check_live_container, counterpart
from fairwin.production.runtime_checks import check_identity, check_live_env, check_running_env


class ServerHandle(Protocol):
    """What the window needs of a launched process; tests inject their own."""

    spec: LaunchSpec

    @property
    def pid(self) -> int | None:
        """The process (and process group) id once started; None where there is no process."""

    @property
    def listens_as(self) -> int | None:
        """The process whose group or session must hold its ports once it answers: its pid (a test's server on a
        thread: the test's own); None where there is no process."""

    @property
    def scheduling(self) -> dict[str, object] | None:
        """What start() applied (CPU set, nice), for the receipt."""

    async def start(self) -> None: ...

    async def wait_healthy(self, session: aiohttp.ClientSession) -> float: ...

    async def process_env(self) -> dict[str, str] | None: ...

    @property
    def expected_env(self) -> dict[str, str]:
        """The whole environment the process should be running with (what the runtime check compares)."""

    def exit_code(self) -> int | None:
        """Its exit status once it has exited; None while it runs (or where it cannot be known yet)."""

    def problem(self) -> str | None:
        """Why the process can no longer be trusted though it may still run (a lost SSH connection)."""

    def described(self) -> ContainerReceipt | None:
        """What its runtime says it runs (a container's name, image, env and mounts); None for a plain process."""

    def report_to(self, note: Note) -> None:
        """Where it reports what happens to it while it runs (a remote server's reconnects), to be journaled."""

    async def stop(self) -> StopRecord: ...


Launcher = Callable[[LaunchSpec, Path], ServerHandle]


def server_log(spec: LaunchSpec) -> str:
    """A process's log in its start's directory: HOST.log on a remote host, server.log here."""
    return f"{spec.host}.log" if spec.host is not None else "server.log"


def local_launcher(spec: LaunchSpec, log_path: Path) -> ServerHandle:
    """A container where the spec is one (here or on its host); else a child process here, or over SSH where the
    spec names a host."""
    if spec.container is not None:
        return ContainerServer(
            spec=spec, log_path=log_path, cli=RuntimeCli.of(spec.container, spec.host, spec.over_ssh())
        )
    if (host := spec.over_ssh()) is not None and spec.host is not None:
        from fairwin.launch.remote import RemoteServer  # asyncssh is imported only where a role runs remotely

        return RemoteServer(spec=spec, host_name=spec.host, host=host, log_path=log_path)
    return LocalServer(spec=spec, log_path=log_path)


def step_launcher(job_id: str, node: str) -> Launcher:
    """Inside a Slurm job's allocation: a role's process here (its head, or a worker) runs as a step of the job on
    ``node``, the one the window runs on, and one on a host bound to another node of the job (``[cluster] hosts``)
    as a step on that node (srun), so that Slurm tracks it; a container, or a process on a ``[hosts.NAME]``, as
    :func:`local_launcher` makes it."""

    def launch(spec: LaunchSpec, log_path: Path) -> ServerHandle:
        if spec.container is not None or not (spec.remote is None or isinstance(spec.remote, SlurmNode)):
            return local_launcher(spec, log_path)
        there = spec.remote.node if spec.remote is not None else node
        return SlurmStep(spec=spec, log_path=log_path, job_id=job_id, node=there, away=there != node)

    return launch


@dataclass
class StartProcess:
    spec: LaunchSpec
    handle: ServerHandle
    log: Path
    pins: dict[str, str]
    ready: Ready | None  # a worker's ready checks; None for the head (its health URL decides)
    repo: RepoPin | None = None  # a git checkout on its host pinned to a commit

    @property
    def ports(self) -> list[int]:
        """The ports it will listen on, on its own host."""
        return listen_ports(self.spec, self.ready.port if self.ready is not None else None)

    async def prove_free(self) -> None:
        """Before its launch: nothing listens on its ports (a server launched there would die on bind)."""
        for port in self.ports:
            await check_free(self.spec, port)

    async def prove_ours(self) -> None:
        """Once it answers: it is what listens on its ports, and it still runs."""
        for port in self.ports:
            await check_ours(self.spec, port, self.handle.listens_as, self.handle.exit_code())


def start_processes(
    site: Site, role_name: str, directory: Path, launcher: Launcher, owner: tuple[str, str]
) -> list[StartProcess]:
    """The role's processes for one start in launch order: its workers, then its head (always last). ``owner``:
    the window's id and the start's name, which name and label its containers."""
    plan = site.plan
    head = make_spec(role_name, plan.roles, site.base_dir, site.places)
    role = plan.roles[role_name]
    found = []
    for spec, worker in zip(worker_specs(head, plan.roles, site.base_dir, site.places), role.workers, strict=True):
        log, spec = directory / server_log(spec), spec.for_start(*owner)
        found.append(StartProcess(spec, launcher(spec, log), log, worker.identity, worker.ready, worker.repo))
    log, head = directory / server_log(head), head.for_start(*owner)
    return [*found, StartProcess(head, launcher(head, log), log, role.identity, None, role.repo)]


async def unlaunchable(site: Site, production_port: tuple[str | None, int] | None) -> list[str]:
    """Why a process of the site's roles could not be launched on its host now: its command, its working directory
    or its fixed ports (production's own port excepted: the take-down frees it); [] when every one could."""
    problems: list[str] = []
    for name in site.roles:
        role = site.plan.roles[name]
        for spec, worker in role_specs(site, name):
            if worker is not None:
                ports = listen_ports(spec, worker.ready.port)
            else:
                ports = listen_ports(spec) if role.port != "auto" else []  # an auto port is chosen at each start
            fixed = [port for port in ports if (spec.host, port) != production_port]
            problems += await launch_problems(spec, fixed)
    return problems


async def check_identities(processes: list[StartProcess]) -> dict[str, dict[str, str]]:
    """Every process's pinned files (and pinned checkout) on its own host, checked before anything is launched:
    member -> pins."""
    checked: dict[str, dict[str, str]] = {}
    await check_checkouts([(p.spec, p.repo) for p in processes if p.repo is not None])
    for process in processes:
        if process.pins:
            found = await digests(process.spec, list(process.pins))
            checked[process.spec.member] = check_identity(process.spec.label, process.pins, found)
    return checked


async def launch_all(window: WindowDir, step: str, processes: list[StartProcess]) -> list[WorkerReceipt]:
    """Launch each process in order, journaled before and after; wait each worker ready before the next.
    Returns the workers' receipts (the head's health is the caller's to wait for)."""
    receipts = []
    for process in processes:
        spec = process.spec
        where = {"host": spec.host, **({"member": spec.member} if spec.member != "head" else {})}
        if spec.container is not None:  # what `fairwin recover` stops through the runtime, by name
            where |= {"container": spec.container_name, "runtime": spec.container.runtime}
        await process.prove_free()
        window.journal_event(step, "launching", argv=spec.shown_argv, **where)
        process.handle.report_to(lambda event, details: window.journal_event(step, event, **details))
        await process.handle.start()
        handle = process.handle
        window.journal_event(step, "launched", pid=handle.pid, group=handle.listens_as, argv=spec.shown_argv, **where)
        if process.ready is not None:
            address = spec.remote.address if spec.remote is not None else "127.0.0.1"
            waiting = wait_ready(handle, process.ready, process.log, spec.label, address)
            ready_s = await (handle.proved(waiting) if isinstance(handle, SlurmStep) else waiting)
            await process.prove_ours()
            box = handle.described()
            set_only: dict[str, object] = {"container": box} if box is not None else {}  # a container worker
            set_only |= {"slurm_step": handle.where()} if isinstance(handle, SlurmStep) else {}  # or a step
            receipts.append(
                WorkerReceipt(
                    member=spec.member,
                    host=spec.host,
                    argv=spec.shown_argv,
                    pid=handle.pid,
                    ready_after_s=round(ready_s, 3),
                    **set_only,
                )
            )
    return receipts


async def check_envs(processes: list[StartProcess], live: LiveProduction | None = None) -> list[str]:
    """The runtime environment check on every process, on its own host; with ``live``, each is compared with
    production's same process as it ran before the take-down, instead of with its base role's declaration."""
    notes: list[str] = []
    for process in processes:
        spec, running = process.spec, await process.handle.process_env()
        member = counterpart(spec, live) if live is not None else None
        found = check_running_env(spec, running, process.handle.expected_env, against_base=member is None)
        if member is not None and running is not None:
            check_live_env(spec.label, member, running, spec.allowed_env_differences)
            box = process.handle.described()
            mounts, image = (box.mounts, box.image_id) if box is not None else (None, None)
            check_live_container(spec, member, mounts, image)
            found.append(f"matches {member.label} beyond its allowed differences")
        notes += [f"{spec.label}: {note}" for note in found] if spec.member != "head" else found
    return notes or ["matches the declaration"]


def problem(processes: list[StartProcess]) -> str | None:
    """The first reason a process can no longer be trusted: a lost connection, or any of them (the head too)
    that exited during the start: what answered since then was not the server fairwin launched."""
    for process in processes:
        if (why := process.handle.problem()) is not None:
            return why
        if (code := process.handle.exit_code()) is not None:
            return f"{process.spec.label} exited with code {code} during the start"
    return None


def require_running(processes: list[StartProcess], what: str) -> None:
    """LaunchError when :func:`problem` finds one: ``what`` (the start, or its wave) is not measured."""
    if (why := problem(processes)) is not None:
        raise LaunchError(f"{why}; {what} is not used")


async def stop_all(processes: list[StartProcess]) -> list[tuple[StartProcess, StopRecord]]:
    """Stop every process, the head first, then the workers in reverse launch order; each stop is tried even
    when an earlier one failed (the first failure is raised after all were tried)."""
    stopped: list[tuple[StartProcess, StopRecord]] = []
    failure: BaseException | None = None
    for process in reversed(processes):
        try:
            stopped.append((process, await process.handle.stop()))
        except Exception as exc:
            failure = failure or exc
            stopped.append((process, StopRecord(signal="failed", returncode=None, seconds=0.0)))
    if failure is not None:
        raise failure
    return stopped
