"""A role's server on another host, detached from the SSH login that started it (docs/hosts.md).

A team's window holds a remote host for an hour or more; a network blip must not lose
it. So the server does not live in the SSH session: it is launched with ``setsid
--fork`` under a small shell that keeps, in the server's run directory on the host
(``RUN_DIR/fairwin-WINDOW-START-ROLE-MEMBER``), the process group's id, the server's
pid, its output and, once it ends, its exit status. The server runs with ``env -i``
and exactly the environment fairwin expects (the host's login environment when the
role inherits, plus its declared variables), so the runtime check reads
``/proc/PID/environ`` on the host against a known whole.

Over the start's connection two channels follow it: ``tail -F`` of its log, copied
into ``starts/sN/<host>.log``, and a watch that ends when the server does and prints
its exit status. When the connection drops, fairwin reconnects with backoff for the
host's ``reconnect_s``, reports the reconnect (the window journals it), and goes on
following from the byte it had reached; a server that died meanwhile fails the start
as any death does. Stopping signals the whole group over SSH (SIGTERM, then SIGKILL
after the role's grace period) and removes the run directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import aiohttp

from fairwin.directory.start_receipt import ContainerReceipt, StopRecord
from fairwin.errors import HostUnreachable, LaunchError, ServerExitedError
from fairwin.launch.local import HEALTH_POLL_S, Note, health_answer, refuse_when_late
from fairwin.launch.process_scripts import PROCESS_RUNNING
from fairwin.launch.spec import LaunchSpec
from fairwin.launch.ssh import asyncssh, connect, on, parse_env, process_on, stop_remote_group  # the ssh extra
from fairwin.plan.hosts import BACKOFF_S, MAX_BACKOFF_S, Host
from fairwin.redaction import scrub_bytes, scrub_file

PID_WAIT_S = 10.0
WATCH_S = 0.2
#: Connections tried to stop a server whose connection was lost (each a new one, BACKOFF_S apart).
STOP_ATTEMPTS = 3
#: Run by ``sh -c`` in a session of its own: the group's id, the server in the background and its pid, then,
#: once it ends, its exit status. ``$0`` is the run directory, the rest the server's command.
WRAPPER = 'echo $$ > "$0/group"; "$@" < /dev/null >> "$0/log" 2>&1 & echo $! > "$0/pid"; wait $!; echo $? > "$0/exit"'
#: Ends when the server does (its pid gone or a zombie: after PROCESS_RUNNING), then prints its exit status: the
#: wrapper writes it, so it is waited for only while the wrapper lives (none when its group was killed, at once).
WATCH = 'while running {pid}; do sleep {s}; done; i=0; while [ ! -f {d}/exit ] && [ $i -lt 10 ] && \
running "$(cat {d}/group 2>/dev/null)"; do sleep 0.1; i=$((i+1)); done; cat {d}/exit 2>/dev/null'


def run_dir(host: Host, name: str) -> str:
    """The run directory on the host, as its shell writes it ("$HOME" left for that shell to expand)."""
    base = host.run_dir if host.run_dir.startswith("/") else f'"$HOME"/{shlex.quote(host.run_dir)}'
    return f"{base}/{shlex.quote(name)}"


@dataclass
class RemoteServer:
    """One server on a remote host; the same life as a local one: start, wait_healthy, always stop."""

    spec: LaunchSpec
    host_name: str
    host: Host
    log_path: Path
    conn: asyncssh.SSHClientConnection | None = None
    remote_pid: int | None = None
    group: int | None = None
    expected: dict[str, str] = field(default_factory=dict)
    exited: int | None = None
    lost: str | None = None
    stop_record: StopRecord | None = None
    note: Note | None = None
    dir: str = ""  # its run directory on the host
    _received: int = 0  # bytes of the host's log copied so far
    _stopping: bool = False
    _supervisor: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        name = self.spec.run_name or f"{self.spec.role_name}-{self.spec.member.replace(' ', '-')}-{time.time_ns()}"
        self.dir = run_dir(self.host, name)

    @property
    def pid(self) -> int | None:
        return self.remote_pid

    @property
    def listens_as(self) -> int | None:
        return self.group  # the server, or a child of a wrapper it runs, listens in this group

    @property
    def scheduling(self) -> dict[str, object] | None:
        return None  # cpus and nice apply on fairwin's own host only (the plan refuses them on a remote role)

    @property
    def expected_env(self) -> dict[str, str]:
        return self.expected

    def described(self) -> ContainerReceipt | None:
        return None

    def report_to(self, note: Note) -> None:
        self.note = note

    async def start(self) -> None:
        self.conn = await connect(self.host_name, self.host)
        login = parse_env((await self._run("env -0")).stdout or b"") if self.spec.inherit_env else {}
        self.expected = {**login, **self.spec.declared_env}
        for key in ("SHLVL", "_", "PWD", "OLDPWD"):  # set by the shell itself, not by the environment given
            self.expected.pop(key, None)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        done = await self._run(self.command())
        if done.exit_status != 0:
            why = (done.stderr or done.stdout or b"").decode(errors="replace").strip()[-200:]  # type: ignore[union-attr]
            raise LaunchError(f"{self.spec.label}: the launch on host {self.host_name} failed: {why}")
        deadline = time.monotonic() + PID_WAIT_S
        while self.remote_pid is None or self.group is None:
            ids = (await self._run(f"cat {self.dir}/pid {self.dir}/group 2>/dev/null")).stdout or b""
            numbers = [int(w) for w in ids.split() if w.isdigit()]
            if len(numbers) == 2:
                self.remote_pid, self.group = numbers
            elif time.monotonic() >= deadline:
                raise LaunchError(f"{self.spec.label}: no pid in {self.dir}/pid on host {self.host_name}")
            else:
                await asyncio.sleep(0.05)
        self._supervisor = asyncio.create_task(self._supervise())

    def command(self) -> str:
        """Make the run directory, then launch the server detached: ``setsid --fork sh -c WRAPPER DIR env -i
        K=V ... ARGV`` (after ``cd`` to its working directory)."""
        env = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(self.expected.items()))
        cd = f"cd {shlex.quote(str(self.spec.cwd))} && " if self.spec.cwd is not None else ""
        made = f"rm -rf {self.dir} && mkdir -p {self.dir} && {cd}"
        wrapped = f"sh -c {shlex.quote(WRAPPER)} {self.dir} env -i {env} {shlex.join(self.spec.argv)}"
        if self.host.detach == "tmux":  # a session named after the run: its pane is the wrapper
            socket = f" -L {shlex.quote(self.host.tmux_socket)}" if self.host.tmux_socket else ""
            start = f" -c {shlex.quote(str(self.spec.cwd))}" if self.spec.cwd is not None else ""
            session = shlex.quote(self.dir.rsplit("/", 1)[-1])
            return f"{made}tmux{socket} new-session -d -s {session}{start} {shlex.quote(wrapped)} < /dev/null"
        return f"{made}setsid --fork {wrapped} < /dev/null > /dev/null 2>&1"  # nothing of the login's channel is held

    async def _run(self, command: str) -> asyncssh.SSHCompletedProcess:
        assert self.conn is not None
        return await on(self.conn, command, encoding=None)

    # -- following it, through drops -------------------------------------------------------------

    async def _supervise(self) -> None:
        """Follow the server until it ends; on a dropped connection, reconnect and follow on."""
        while not self._stopping:
            try:
                status = await self._follow()
            except (asyncssh.Error, OSError) as exc:
                status = f"lost: {exc}"
            if not status.startswith("lost"):  # no status: its whole group was killed (by its stop, or another)
                self.exited = int(status) if status.lstrip("-").isdigit() else None if self._stopping else -1
                return
            if self._stopping or not await self._reconnect(status):
                return

    async def _follow(self) -> str:
        """Copy the log and watch the server over the current connection: its exit status, or "lost ..."."""
        assert self.conn is not None
        tail = await process_on(
            self.conn, f"tail -c +{self._received + 1} -F {self.dir}/log 2>/dev/null", encoding=None
        )
        pump = asyncio.create_task(self._copy(tail.stdout))
        try:
            script = PROCESS_RUNNING + WATCH.format(pid=self.remote_pid, s=WATCH_S, d=self.dir)
            watch = await on(self.conn, script)
            if watch.exit_status is None:
                return "lost: the connection closed"
            await asyncio.sleep(WATCH_S)  # the tail's last lines
            status = str(watch.stdout or "").strip()
        finally:
            tail.close()
            with contextlib.suppress(asyncio.TimeoutError, asyncssh.Error, OSError):
                await asyncio.wait_for(pump, 5.0)
        await self._catch_up()
        return status

    async def _copy(self, stream: Any) -> None:
        with self.log_path.open("ab") as log, contextlib.suppress(asyncssh.Error, OSError):
            async for chunk in stream:
                self._write(log, chunk)

    async def _catch_up(self) -> None:
        """The rest of the host's log, read once the server has ended: on a busy host the follow's ``tail`` may
        not have started, or not sent its last lines, before it was closed (a worker that printed why it exited
        and was gone at once left an empty copy)."""
        with contextlib.suppress(asyncssh.Error, OSError):
            rest = await self._run(f"tail -c +{self._received + 1} {self.dir}/log 2>/dev/null")
            if isinstance(rest.stdout, bytes) and rest.stdout:
                with self.log_path.open("ab") as log:
                    self._write(log, rest.stdout)

    def _write(self, log: BinaryIO, chunk: bytes) -> None:
        """A chunk of the host's log into its copy, scrubbed, and counted (the next tail starts after it)."""
        self._received += len(chunk)
        log.write(scrub_bytes(chunk))
        log.flush()

    async def _reconnect(self, why: str) -> bool:
        """A new connection within the host's ``reconnect_s``, with backoff; reported. False (and the server
        counted lost) when none came."""
        t0, attempts, delay = time.monotonic(), 0, BACKOFF_S
        while True:
            left = self.host.reconnect_s - (time.monotonic() - t0)
            if left <= 0:
                self.lost = (
                    f"{self.spec.label}: the SSH connection to host {self.host_name} was lost "
                    f"({why.removeprefix('lost: ')}) and "
                    f"not re-established within {self.host.reconnect_s:g} s (hosts.{self.host_name}.reconnect_s)"
                )
                return False
            attempts += 1
            try:
                conn = await connect(self.host_name, self.host)
                break
            except HostUnreachable:
                await asyncio.sleep(min(delay, max(0.0, self.host.reconnect_s - (time.monotonic() - t0))))
                delay = min(delay * 2, MAX_BACKOFF_S)
        if self.conn is not None:
            self.conn.close()
        self.conn = conn
        if self.note is not None:  # journaled: the one record of a reconnection
            seconds = round(time.monotonic() - t0, 3)
            record = {"host": self.host_name, "attempts": attempts, "seconds": seconds}
            self.note("reconnected", {**record, "member": self.spec.member, "pid": self.remote_pid})
        return True

    # -- what the window asks of it ---------------------------------------------------------------

    async def process_env(self) -> dict[str, str] | None:
        if self.conn is None or self.remote_pid is None:
            return None
        done = await self._run(f"cat /proc/{self.remote_pid}/environ")
        return parse_env(done.stdout or b"") if done.exit_status == 0 else None

    def problem(self) -> str | None:
        return self.lost

    def exit_code(self) -> int | None:
        return self.exited

    async def wait_healthy(self, session: aiohttp.ClientSession) -> float:
        t0 = time.monotonic()
        while True:
            if (code := self.exit_code()) is not None or self.lost:
                why = self.lost or f"{self.spec.label}: server exited with code {code} before it was healthy"
                raise ServerExitedError(f"{why} (log: {self.log_path})")
            last = await health_answer(session, self.spec.health_url)
            if last is None:
                return time.monotonic() - t0
            refuse_when_late(self.spec, t0, last, self.log_path)
            await asyncio.sleep(HEALTH_POLL_S)

    async def stop(self) -> StopRecord:
        """SIGTERM the remote group, SIGKILL after the grace period (over a new connection where the start's is
        gone), then remove its run directory."""
        if self.stop_record is not None:
            return self.stop_record
        self._stopping = True
        t0 = time.monotonic()
        if self.group is None:
            self.stop_record = StopRecord(signal="none", returncode=None, seconds=0.0)
            await self._close()
            return self.stop_record
        sent = await self._stop_group(self.group)
        if self._supervisor is not None:  # its watch ends with the server, and says how it ended
            with contextlib.suppress(asyncio.TimeoutError, asyncssh.Error, OSError):
                await asyncio.wait_for(asyncio.shield(self._supervisor), 3.0)
        assert self.conn is not None  # _stop_group connected
        with contextlib.suppress(asyncssh.Error, OSError):  # a directory left behind names a dead group: harmless
            await on(self.conn, f"rm -rf {self.dir}")
        self.stop_record = StopRecord(signal=sent, returncode=self.exited, seconds=time.monotonic() - t0)
        await self._close()
        return self.stop_record

    async def _stop_group(self, group: int) -> str:
        """The group stopped over the start's connection, or over a new one where that one is gone (a connection
        lost just now is only found by using it, and a new one may be cut too: STOP_ATTEMPTS, BACKOFF_S apart)."""
        for attempt in range(STOP_ATTEMPTS):
            try:
                if self.conn is None or attempt:
                    self.conn = await connect(self.host_name, self.host)
                return await stop_remote_group(self.conn, group, self.spec.stop_timeout_s)
            except (asyncssh.Error, OSError, HostUnreachable) as exc:
                why = str(exc) or type(exc).__name__
            if attempt + 1 < STOP_ATTEMPTS:
                await asyncio.sleep(BACKOFF_S)
        raise LaunchError(
            f"{self.spec.label}: its server on host {self.host_name} could not be stopped over SSH ({why}, "
            f"{STOP_ATTEMPTS} attempts); `fairwin recover` stops it by its run directory"
        )

    async def _close(self) -> None:
        if self._supervisor is not None and not self._supervisor.done():
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError, asyncssh.Error, OSError):
                await self._supervisor
        scrub_file(self.log_path)  # a secret split across two chunks of output is hidden here
        if self.conn is not None:
            self.conn.close()
            with contextlib.suppress(asyncssh.Error, OSError):
                await self.conn.wait_closed()
