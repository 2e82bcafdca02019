"""The local launcher: a role's server as a child process in its own process group.

Output goes to a log file, never to a pipe nobody reads (a full pipe stalls the
server mid-measurement). Stopping signals the whole group, SIGTERM first and
SIGKILL after the role's grace period, so engine worker processes die with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from dotenv import dotenv_values

from fairwin.errors import HealthTimeoutError, LaunchError, PlanError, ServerExitedError
from fairwin.launch.scheduling import Scheduling
from fairwin.plan.hosts import Host
from fairwin.plan.roles import Role

PLACEHOLDER = re.compile(r"\{(port|python|plan_dir|env:[A-Za-z_][A-Za-z0-9_]*)\}")
HEALTH_POLL_S = 0.1
LOG_TAIL_BYTES = 2000


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fill(text: str, values: dict[str, str]) -> str:
    """Replace {port}, {python}, {plan_dir} and {env:NAME}; other braces (JSON in an argument) are left alone."""

    def one(match: re.Match[str]) -> str:
        key = match.group(1)
        if key.startswith("env:"):
            name = key[4:]
            if name not in os.environ:
                raise PlanError(f"the plan uses {{{key}}} but {name} is not set; export {name}=... and run again")
            return os.environ[name]
        return values[key]

    return PLACEHOLDER.sub(one, text)


@dataclass(frozen=True)
class LaunchSpec:
    """A role made concrete for one start: placeholders filled, env assembled."""

    role_name: str
    argv: list[str]
    env: dict[str, str]
    declared_env: dict[str, str]
    cwd: Path | None
    base_url: str
    health_url: str
    startup_timeout_s: float
    stop_timeout_s: float
    model: str
    base_role: str | None = None
    base_env: dict[str, str] | None = None  # the base role's effective env, for the runtime check
    allowed_env_differences: tuple[str, ...] = ()
    scheduling: Scheduling = field(default_factory=Scheduling)
    host: str | None = None  # a [hosts.NAME] the server runs on over SSH; None: here
    remote: Host | None = None  # that host, its paths resolved
    inherit_env: bool = True


def _declared_env(role_name: str, roles: Mapping[str, Role], plan_dir: Path) -> dict[str, str]:
    """A role's declared variables: its base's (minus unset_env), then its env files, then its env."""
    role = roles[role_name]
    declared: dict[str, str] = {}
    if role.base is not None:
        declared = _declared_env(role.base, roles, plan_dir)
        for key in role.unset_env:
            declared.pop(key, None)
    for env_file in role.env_files:
        path = env_file if env_file.is_absolute() else plan_dir / env_file
        if not path.is_file():
            raise PlanError(f"roles.{role_name}.env_files: {path} does not exist; fix the path")
        declared.update({k: v or "" for k, v in dotenv_values(path).items()})
    declared.update(role.env)
    return declared


def _effective_env(role: Role, declared: dict[str, str], values: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ) if role.inherit_env else {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    env.update({k: fill(v, values) for k, v in declared.items()})
    return env


def make_spec(
    role_name: str, roles: Mapping[str, Role], plan_dir: Path, hosts: Mapping[str, Host] | None = None
) -> LaunchSpec:
    role = roles[role_name]
    port = free_port() if role.port == "auto" else role.port
    python = hosts[role.host].python if role.host is not None and hosts else sys.executable
    values = {"port": str(port), "python": python, "plan_dir": str(plan_dir)}
    declared = _declared_env(role_name, roles, plan_dir)
    base_env = None
    if role.base is not None:
        base_env = _effective_env(roles[role.base], _declared_env(role.base, roles, plan_dir), values)
    cwd = None
    if role.cwd is not None:
        cwd = Path(fill(str(role.cwd), values))
        cwd = cwd if cwd.is_absolute() else plan_dir / cwd
    base_url = fill(role.base_url, values)
    return LaunchSpec(
        role_name=role_name,
        argv=[fill(arg, values) for arg in role.argv],
        env=_effective_env(role, declared, values),
        declared_env={k: fill(v, values) for k, v in declared.items()},
        cwd=cwd,
        base_url=base_url,
        health_url=base_url + role.health_path,
        startup_timeout_s=role.startup_timeout_s,
        stop_timeout_s=role.stop_timeout_s,
        model=role.served_model,
        base_role=role.base,
        base_env=base_env,
        allowed_env_differences=tuple(role.allowed_env_differences),
        scheduling=Scheduling(cpus=role.cpus, nice=role.nice),
        host=role.host,
        remote=_remote(role.host, hosts, plan_dir),
        inherit_env=role.inherit_env,
    )


def _remote(name: str | None, hosts: Mapping[str, Host] | None, plan_dir: Path) -> Host | None:
    if name is None or not hosts:
        return None
    from fairwin.launch.ssh import resolved  # asyncssh is imported only where a role runs remotely

    return resolved(hosts[name], plan_dir)


def read_process_env(pid: int) -> dict[str, str] | None:
    """The environment a process is running with; None where /proc cannot tell."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in pairs}


@dataclass
class StopRecord:
    signal: str  # "none" (already exited), "SIGTERM" or "SIGKILL"
    returncode: int | None
    seconds: float


@dataclass
class LocalServer:
    """One running server. Use :meth:`start`, :meth:`wait_healthy`, and always :meth:`stop` (or, outside an
    event loop, :meth:`launch` and :meth:`terminate`)."""

    spec: LaunchSpec
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    started_unix: float = 0.0
    healthy_after_s: float | None = None
    stop_record: StopRecord | None = field(default=None)
    autogroup: str | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def scheduling(self) -> dict[str, object] | None:
        """The CPU set and priority applied, read back from the kernel now (after start: the server's own)."""
        pid = self.process.pid if self.process is not None else None
        return self.spec.scheduling.record(pid, self.autogroup)

    async def start(self) -> None:
        self.launch()

    async def stop(self) -> StopRecord:
        """:meth:`terminate` off the event loop: the grace period is waited in a thread, and a cancellation of
        the caller meanwhile does not cut the stop short (the thread finishes it)."""
        return await asyncio.to_thread(self.terminate)

    def launch(self) -> None:
        """Start the server (the blocking form of :meth:`start`)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        prefix = self.spec.scheduling.command_prefix(self.spec.role_name)
        with self.log_path.open("ab") as log:
            try:
                self.process = subprocess.Popen(
                    [*prefix, *self.spec.argv],
                    env=self.spec.env,
                    cwd=self.spec.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group, so stop() reaches its workers
                )
            except OSError as exc:
                raise LaunchError(
                    f"role {self.spec.role_name}: cannot run {self.spec.argv[0]!r}: {exc.strerror}; fix the role's argv"
                ) from None
        self.started_unix = time.time()
        self.autogroup = self.spec.scheduling.apply_to_session(self.process.pid)

    async def process_env(self) -> dict[str, str] | None:
        return read_process_env(self.process.pid) if self.process is not None else None

    @property
    def expected_env(self) -> dict[str, str]:
        """The environment the server should run with: the declared one, on fairwin's own."""
        return self.spec.env

    def problem(self) -> str | None:
        """Why the server can no longer be trusted though it may still answer (never, for a local child)."""
        return None

    def log_tail(self) -> str:
        try:
            data = self.log_path.read_bytes()[-LOG_TAIL_BYTES:]
        except OSError:
            return ""
        lines = data.decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else ""

    async def wait_healthy(self, session: aiohttp.ClientSession) -> float:
        """Poll the health path until 200; fail fast if the process exits."""
        assert self.process is not None, "start() first"
        t0 = time.monotonic()
        deadline = t0 + self.spec.startup_timeout_s
        timeout = aiohttp.ClientTimeout(total=2.0)
        last = "no answer yet"
        while True:
            code = self.process.poll()
            if code is not None:
                raise ServerExitedError(
                    f"role {self.spec.role_name}: server exited with code {code} before it was healthy; "
                    f"last log line: {self.log_tail()!r} (log: {self.log_path})"
                )
            try:
                async with session.get(self.spec.health_url, timeout=timeout) as response:
                    if response.status == 200:
                        self.healthy_after_s = time.monotonic() - t0
                        return self.healthy_after_s
                    last = f"HTTP {response.status}"
            except (TimeoutError, aiohttp.ClientError) as exc:
                last = str(exc) or type(exc).__name__
            if time.monotonic() >= deadline:
                raise HealthTimeoutError(
                    f"role {self.spec.role_name}: {self.spec.health_url} not healthy after "
                    f"{self.spec.startup_timeout_s:g} s ({last}); check base_url/port or raise startup_timeout_s "
                    f"(log: {self.log_path})"
                )
            await asyncio.sleep(HEALTH_POLL_S)

    def terminate(self) -> StopRecord:
        """SIGTERM the group, then SIGKILL after the grace period. Safe to call twice."""
        if self.stop_record is not None:
            return self.stop_record
        t0 = time.monotonic()
        process = self.process
        if process is None or process.poll() is not None:
            self.stop_record = StopRecord("none", process.returncode if process else None, 0.0)
            return self.stop_record
        sent = "SIGTERM"
        signal_group(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=self.spec.stop_timeout_s)
        except subprocess.TimeoutExpired:
            sent = "SIGKILL"
            signal_group(process.pid, signal.SIGKILL)
            process.wait()
        # Workers that ignored SIGTERM after their leader exited must not outlive the start.
        signal_group(process.pid, signal.SIGKILL)
        self.stop_record = StopRecord(sent, process.returncode, time.monotonic() - t0)
        return self.stop_record


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Signal a whole process group; one already gone, or not ours to signal, is left alone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
