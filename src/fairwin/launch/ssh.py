"""The SSH launcher: a role's server on another host, through asyncssh (docs/hosts.md).

sshd runs each command as the leader of a new session, so the server's pid is its
process group's id: the command prints ``$$`` and then ``exec``s the server, and
stopping signals the whole group (SIGTERM, then SIGKILL after the role's grace
period) over SSH, reconnecting when the first connection was lost. The server runs
with ``env -i`` and exactly the environment fairwin expects (the host's login
environment when the role inherits, plus its declared variables), so the runtime
check reads ``/proc/PID/environ`` on the host against a known whole. Its output is
streamed back into ``starts/sN/<host>.log``. Host keys are verified against the
host's ``known_hosts``; an unknown host is refused in one line, never trusted.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import time
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from fairwin.errors import (
    GateRefused,
    HealthTimeoutError,
    InputError,
    LaunchError,
    MissingExtraError,
    ServerExitedError,
)

try:
    import asyncssh
except ModuleNotFoundError as exc:  # an extra: fairwin runs without it until a host is used
    raise MissingExtraError("ssh", exc.name) from None

from fairwin.launch.local import HEALTH_POLL_S, StopRecord
from fairwin.launch.spec import LaunchSpec
from fairwin.plan.hosts import Host
from fairwin.redaction import scrub, scrub_bytes, scrub_file, secret_from_env

POLL_S = 0.1
T = TypeVar("T")
EXIT_STATUS_WAIT_S = 2.0


async def connect(name: str, host: Host) -> asyncssh.SSHClientConnection:
    """A connection to a declared host (its paths resolved: :func:`resolved`), its key verified; any failure is
    one line naming the host and the fix."""
    known = host.known_hosts
    keys = [str(host.key_file)] if host.key_file is not None else None
    where = f"host {name} ({host.address}:{host.port})"
    options: dict[str, object] = {
        "known_hosts": str(known),
        "client_keys": keys,
        "password": None,
        "preferred_auth": "publickey",
        "connect_timeout": host.connect_timeout_s,
    }
    if not host.agent:
        options["agent_path"] = None  # else asyncssh uses $SSH_AUTH_SOCK, as ssh does
    if host.passphrase_env is not None:
        options["passphrase"] = secret_from_env(host.passphrase_env, f"hosts.{name}.passphrase_env")
    try:
        return await asyncssh.connect(host.address, port=host.port, username=host.user, **options)
    except (asyncssh.KeyImportError, asyncssh.KeyEncryptionError) as exc:  # an encrypted key, no or a wrong passphrase
        raise LaunchError(
            f"{where}: cannot read hosts.{name}.key_file {host.key_file}: {scrub(str(exc))}; "
            f"for an encrypted key, name the variable holding its passphrase in "
            f"hosts.{name}.passphrase_env"
        ) from None
    except asyncssh.HostKeyNotVerifiable:
        raise LaunchError(f"{where}: its host key is not in {known}; verify it and add it (ssh-keyscan)") from None
    except asyncssh.PermissionDenied:
        raise LaunchError(f"{where}: the key was refused; check hosts.{name}.key_file and the user") from None
    except (OSError, asyncssh.Error, TimeoutError) as exc:
        raise LaunchError(f"{where}: cannot connect: {exc or type(exc).__name__}") from None


def parse_env(raw: bytes | str) -> dict[str, str]:
    raw = raw.encode() if isinstance(raw, str) else raw
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in pairs}


async def _run(conn: asyncssh.SSHClientConnection, command: str) -> asyncssh.SSHCompletedProcess:
    return await conn.run(command, check=False, encoding=None)


@dataclass
class RemoteServer:
    """One server on a remote host; the same life as a local one: start, wait_healthy, always stop."""

    spec: LaunchSpec
    host_name: str
    host: Host
    log_path: Path
    conn: asyncssh.SSHClientConnection | None = None
    process: asyncssh.SSHClientProcess[bytes] | None = None
    remote_pid: int | None = None
    expected: dict[str, str] = field(default_factory=dict)
    lost: str | None = None
    stop_record: StopRecord | None = None
    _pump: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self.remote_pid

    @property
    def listens_as(self) -> int | None:
        return self.pid

    @property
    def scheduling(self) -> dict[str, object] | None:
        return None  # cpus and nice apply on fairwin's own host only (the plan refuses them on a remote role)

    @property
    def expected_env(self) -> dict[str, str]:
        return self.expected

    async def start(self) -> None:
        self.conn = await connect(self.host_name, self.host)
        login = parse_env((await _run(self.conn, "env -0")).stdout or b"") if self.spec.inherit_env else {}
        self.expected = {**login, **self.spec.declared_env}
        for key in ("SHLVL", "_", "PWD", "OLDPWD"):  # set by the shell itself, not by the environment given
            self.expected.pop(key, None)
        command = self.command()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.process = await self.conn.create_process(command, stderr=asyncssh.STDOUT, encoding=None)
        first = await self.process.stdout.readline()
        if not first.strip().isdigit():
            raise LaunchError(
                f"{self.spec.label}: no pid from the launch ({first[:200]!r}); is `sh` the login shell's sh?"
            )
        self.remote_pid = int(first)
        self._pump = asyncio.create_task(self._copy_output())

    def command(self) -> str:
        """``cd DIR; echo $$; exec env -i K=V ... ARGV``: the server becomes the session leader sshd made."""
        env = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(self.expected.items()))
        cd = f"cd {shlex.quote(str(self.spec.cwd))} && " if self.spec.cwd is not None else ""
        return f"{cd}echo $$ && exec env -i {env} {shlex.join(self.spec.argv)}"

    async def _copy_output(self) -> None:
        assert self.process is not None
        with self.log_path.open("ab") as log:
            try:
                async for chunk in self.process.stdout:
                    log.write(scrub_bytes(chunk))
                    log.flush()
            except (asyncssh.Error, OSError) as exc:
                self.lost = f"the SSH connection to host {self.host_name} was lost: {exc}"
        if self.process.exit_status is None and self.lost is None:
            # The output ends a moment before the exit status arrives: a server that exited is not a lost link.
            with contextlib.suppress(asyncio.TimeoutError, asyncssh.Error, OSError):
                await asyncio.wait_for(self.process.wait(), EXIT_STATUS_WAIT_S)
        if self.process.exit_status is None and self.stop_record is None and self.lost is None:
            self.lost = f"the SSH connection to host {self.host_name} closed while the process ran"

    async def process_env(self) -> dict[str, str] | None:
        if self.conn is None or self.remote_pid is None:
            return None
        done = await _run(self.conn, f"cat /proc/{self.remote_pid}/environ")
        return parse_env(done.stdout or b"") if done.exit_status == 0 else None

    def problem(self) -> str | None:
        return self.lost

    def described(self) -> dict[str, Any] | None:
        return None  # a plain process: its receipt is its argv and pid

    def exit_code(self) -> int | None:
        return self.process.exit_status if self.process is not None else None

    async def wait_healthy(self, session: aiohttp.ClientSession) -> float:
        t0 = time.monotonic()
        last = "no answer yet"
        while True:
            if (code := self.exit_code()) is not None or self.lost:
                raise ServerExitedError(
                    f"{self.spec.label}: "
                    + (self.lost or f"server exited with code {code} before it was healthy")
                    + f" (log: {self.log_path})"
                )
            try:
                async with session.get(self.spec.health_url, timeout=aiohttp.ClientTimeout(total=2.0)) as response:
                    if response.status == 200:
                        return time.monotonic() - t0
                    last = f"HTTP {response.status}"
            except (TimeoutError, aiohttp.ClientError) as exc:
                last = str(exc) or type(exc).__name__
            if time.monotonic() - t0 >= self.spec.startup_timeout_s:
                raise HealthTimeoutError(
                    f"{self.spec.label}: "
                    f"{self.spec.health_url} not healthy after {self.spec.startup_timeout_s:g} s "
                    f"({last}; log: {self.log_path})"
                )
            await asyncio.sleep(HEALTH_POLL_S)

    async def stop(self) -> StopRecord:
        """SIGTERM the remote group, SIGKILL after the grace period; over a new connection if the first is gone."""
        if self.stop_record is not None:
            return self.stop_record
        t0 = time.monotonic()
        if self.remote_pid is None:
            self.stop_record = StopRecord("none", None, 0.0)
            await self._close()
            return self.stop_record
        conn = self.conn if self.conn is not None and not self.lost else None
        if conn is None:
            conn = self.conn = await connect(self.host_name, self.host)
        sent = await stop_remote_group(conn, self.remote_pid, self.spec.stop_timeout_s)
        self.stop_record = StopRecord(sent, self.exit_code(), time.monotonic() - t0)
        await self._close()
        return self.stop_record

    async def _close(self) -> None:
        if self._pump is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncssh.Error, OSError):
                await asyncio.wait_for(self._pump, 5.0)
        scrub_file(self.log_path)  # a secret split across two chunks of output is hidden here
        if self.conn is not None:
            self.conn.close()
            with contextlib.suppress(asyncssh.Error, OSError):
                await self.conn.wait_closed()


async def stop_remote_group(conn: asyncssh.SSHClientConnection, pgid: int, grace_s: float) -> str:
    """SIGTERM a remote process group, wait for it to go, SIGKILL what is left; the signal that ended it. The group,
    not only its leader: a wrapper that exited may have left its server running in it."""
    alive = await _run(conn, f"kill -0 -- -{pgid}")
    if alive.exit_status != 0:
        return "none"
    await _run(conn, f"kill -TERM -- -{pgid}")
    deadline = time.monotonic() + grace_s
    sent = "SIGTERM"
    while (await _run(conn, f"kill -0 -- -{pgid}")).exit_status == 0:
        if time.monotonic() >= deadline:
            sent = "SIGKILL"
            break
        await asyncio.sleep(POLL_S)
    await _run(conn, f"kill -KILL -- -{pgid} 2>/dev/null; true")  # workers that outlived their leader go too
    return sent


async def reachable(hosts: Mapping[str, Host]) -> None:
    """Connect to each host (its key verified) and close: a host that would refuse the window refuses it now,
    before anything is touched (GateRefused, exit 4, naming the host)."""
    for name, host in hosts.items():
        try:
            conn = await connect(name, host)
        except LaunchError as exc:
            raise GateRefused(str(exc)) from None
        conn.close()


async def run_once(name: str, host: Host, command: str, timeout_s: float | None = None) -> asyncssh.SSHCompletedProcess:
    """One command on the host over a connection of its own, closed after; LaunchError when the host cannot be
    reached or the command outlives ``timeout_s``. Its exit status is the caller's to judge."""
    conn = await connect(name, host)
    try:
        return await asyncio.wait_for(conn.run(command, check=False), timeout_s)
    except TimeoutError:
        raise LaunchError(f"{command!r} on host {name} took over {timeout_s:g} s") from None
    finally:
        conn.close()


def runner(name: str, host: Host, timeout_s: float = 10.0) -> Callable[[list[str]], str]:
    """A blocking command runner on the host (for the GPU sampler's thread): its stdout, or InputError."""

    async def run(argv: list[str]) -> str:
        try:
            done = await run_once(name, host, shlex.join(argv), timeout_s)
        except LaunchError as exc:
            raise InputError(str(exc)) from None
        if done.exit_status != 0:
            raise InputError(
                f"{shlex.join(argv)} on host {name} exited {done.exit_status}: "
                f"{str(done.stderr or done.stdout).strip()[:200]}"
            )
        return str(done.stdout or "")

    return lambda argv: blocking(run(argv))


def blocking(work: Coroutine[Any, Any, T]) -> T:
    """Run SSH work to its end from synchronous code: on this thread when no event loop runs here, else on a
    thread of its own (the window's loop is never re-entered)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()
