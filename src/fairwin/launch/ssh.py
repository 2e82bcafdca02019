"""SSH to a declared host, through asyncssh (docs/hosts.md): connecting, one command, a process group stopped.

Host keys are verified against the host's ``known_hosts``; an unknown host is refused
in one line, never trusted. The server a role runs there is launch/remote.py's.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import math
import shlex
import threading
import time
import warnings
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from fairwin.errors import (
    HostUnreachable,
    InputError,
    LaunchError,
    MissingExtraError,
)

try:
    with warnings.catch_warnings():
        # cryptography 51 deprecates DSA, which asyncssh still names as it imports; said on stderr, the warning
        # would break every one-line error of a command that touches a host. fairwin offers no DSA key.
        warnings.filterwarnings("ignore", message="DSA is deprecated", category=UserWarning)
        import asyncssh as asyncssh  # re-exported: fairwin imports asyncssh from here, its warnings filtered
except ModuleNotFoundError as exc:  # an extra: fairwin runs without it until a host is used
    raise MissingExtraError("ssh", exc.name) from None

from fairwin.commands import Retry
from fairwin.launch.process_scripts import GROUP_ALIVE
from fairwin.plan.hosts import BACKOFF_S, MAX_BACKOFF_S, Host
from fairwin.redaction import scrub, secret_from_env

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
        raise HostUnreachable(f"{where}: cannot connect: {exc or type(exc).__name__}") from None


def parse_env(raw: bytes | str) -> dict[str, str]:
    raw = raw.encode() if isinstance(raw, str) else raw
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in pairs}


async def _run(conn: asyncssh.SSHClientConnection, command: str) -> asyncssh.SSHCompletedProcess:
    return await conn.run(command, check=False, encoding=None)


#: The whole stop as one remote script: each command over SSH is a channel of its own (about a tenth of a second
#: here, more over a real network), and a stop that polled with one command a look took two seconds a server.
#: Prints the signal that ended the group: none (already gone), SIGTERM, or SIGKILL once ``{n}`` looks
#: ``{poll}`` s apart (the grace period) found it still there. Workers that outlived their leader go too.
STOP_GROUP = (
    "alive {g} || {{ echo none; exit 0; }}; kill -TERM -{g} 2>/dev/null; i=0; sent=SIGTERM; "
    "while alive {g}; do if [ $i -ge {n} ]; then sent=SIGKILL; break; fi; sleep {poll}; "
    "i=$((i+1)); done; kill -KILL -{g} 2>/dev/null; echo $sent"
)


async def stop_remote_group(conn: asyncssh.SSHClientConnection, pgid: int, grace_s: float) -> str:
    """SIGTERM a remote process group, wait for it to go, SIGKILL what is left; the signal that ended it. The group,
    not only its leader: a wrapper that exited may have left its server running in it."""
    looks = max(1, math.ceil(grace_s / POLL_S))
    done = await _run(conn, GROUP_ALIVE + STOP_GROUP.format(g=int(pgid), n=looks, poll=POLL_S))
    if done.exit_status is None and done.exit_signal is None:  # the connection was cut while the stop ran
        raise asyncssh.ConnectionLost(f"the connection closed before the host's shell answered (group {pgid})")
    out = done.stdout or b""
    sent = (out.decode(errors="replace") if isinstance(out, bytes) else out).strip().splitlines()
    if done.exit_status != 0 or not sent or sent[-1] not in ("none", "SIGTERM", "SIGKILL"):
        raise LaunchError(f"stopping process group {pgid}: the host's shell answered {done.exit_status}: {sent}")
    return sent[-1]


async def unreachable(hosts: Mapping[str, Host]) -> list[str]:
    """Connect to each host (its key verified) and close: each host that would refuse a window now, and why."""
    problems = []
    for name, host in hosts.items():
        try:
            conn = await connect(name, host)
        except LaunchError as exc:
            problems.append(str(exc))
            continue
        conn.close()
    return problems


async def run_once(
    name: str, host: Host, command: str, timeout_s: float | None = None, *, retry: Retry
) -> asyncssh.SSHCompletedProcess:
    """One command on the host over a connection of its own, closed after; its exit status is the caller's to judge.

    ``retry="read"``: a host that cannot be reached, or a connection lost while the command runs, is tried again
    with backoff for as long as the host's ``reconnect_s`` allows (a blip must not fail a check the server would
    pass). ``retry="action"``: one try; a connection lost once the command was sent is a LaunchError saying it may
    have run, never a second run. A command that outlives ``timeout_s`` is a LaunchError either way."""
    t0, delay = time.monotonic(), BACKOFF_S
    while True:
        done: asyncssh.SSHCompletedProcess | None = None
        try:
            done = await _once(name, host, command, timeout_s)
            if done.exit_status is not None or done.exit_signal is not None:
                return done
            failure: LaunchError = LaunchError(f"{command!r} on host {name}: the connection closed before it exited")
        except HostUnreachable as exc:
            failure = exc
        except _Lost as exc:
            failure = LaunchError(f"{command!r} on host {name}: the connection was lost ({exc.__cause__})")
        if retry == "action":
            if done is not None or not isinstance(failure, HostUnreachable):
                raise LaunchError(f"{failure}; it may have run, so it is not run again: check host {name}")
            raise failure
        left = host.reconnect_s - (time.monotonic() - t0)
        if left <= 0:
            if done is not None:
                return done  # no exit status: the caller reads it as a failure
            raise failure
        await asyncio.sleep(min(delay, left))
        delay = min(delay * 2, MAX_BACKOFF_S)


class _Lost(Exception):
    """The connection was lost between its login and the command's end (its cause says how)."""


async def _once(name: str, host: Host, command: str, timeout_s: float | None) -> asyncssh.SSHCompletedProcess:
    conn = await connect(name, host)
    try:
        return await asyncio.wait_for(conn.run(command, check=False), timeout_s)
    except TimeoutError:
        raise LaunchError(f"{command!r} on host {name} took over {timeout_s:g} s") from None
    except (asyncssh.Error, OSError) as exc:
        raise _Lost() from exc
    finally:
        conn.close()


async def on(conn: asyncssh.SSHClientConnection, command: str, **options: Any) -> asyncssh.SSHCompletedProcess:
    """A command over a connection the caller keeps (a server's, launch/remote.py), to its exit; its status is the
    caller's to judge. Whether it may be sent again on a new connection is the caller's rule to apply."""
    return await conn.run(command, check=False, **options)


async def process_on(
    conn: asyncssh.SSHClientConnection, command: str, **options: Any
) -> asyncssh.SSHClientProcess[Any]:
    """A command over a connection the caller keeps, started and left to run (a log followed as it grows)."""
    return await conn.create_process(command, **options)


def runner(name: str, host: Host, timeout_s: float = 10.0) -> Callable[[list[str]], str]:
    """A blocking runner of reads on the host (the GPU sampler's nvidia-smi, on its thread): its stdout, or
    InputError. Every runner of one host shares one connection, kept open (:class:`HostSession`); what it runs
    only reads, so a command whose connection was lost is asked again once, on a new one."""
    key = (name, host.model_dump_json())
    with _SESSIONS_GUARD:
        session = _SESSIONS.get(key)
        if session is None:
            session = _SESSIONS[key] = HostSession(name, host)
    return lambda argv: session.run(argv, timeout_s)


class HostSession:
    """Commands on one host over one SSH connection kept open between them, for callers without an event loop.

    A sampler reads nvidia-smi every interval: a login for each read cost a key exchange (and a line in the host's
    auth log) per sample, several a second across a window's hosts. The connection is made at the first command;
    one lost since the last is made again, once. Its event loop runs on a thread of its own, so any thread may
    call :meth:`run`, and several at once. Written here because asyncssh keeps no connection between callers on
    other threads; ended when fairwin exits (:func:`close_sessions`)."""

    def __init__(self, name: str, host: Host) -> None:
        self.name, self.host = name, host
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"ssh {name}", daemon=True)
        self._thread.start()
        self._conn: asyncssh.SSHClientConnection | None = None
        self._connecting = asyncio.Lock()  # used on the session's own loop only
        self.closed = False

    def run(self, argv: list[str], timeout_s: float) -> str:
        if self.closed:  # its loop no longer runs: a command sent to it would never be answered
            raise InputError(f"{shlex.join(argv)} on host {self.name}: its connection was closed as fairwin ended")
        return asyncio.run_coroutine_threadsafe(self._command(shlex.join(argv), timeout_s), self._loop).result()

    async def _connection(self) -> asyncssh.SSHClientConnection:
        async with self._connecting:
            if self._conn is None:
                try:
                    self._conn = await connect(self.name, self.host)
                except LaunchError as exc:
                    raise InputError(str(exc)) from None
            return self._conn

    async def _command(self, command: str, timeout_s: float) -> str:
        for attempt in (1, 2):
            conn = await self._connection()
            try:
                done = await asyncio.wait_for(conn.run(command, check=False), timeout_s)
            except TimeoutError:
                raise InputError(f"{command!r} on host {self.name} took over {timeout_s:g} s") from None
            except (asyncssh.Error, OSError) as exc:  # lost since the last command: log in once more
                self._drop(conn)
                if attempt == 2:
                    raise InputError(f"{command!r} on host {self.name}: the connection was lost ({exc})") from None
                continue
            if done.exit_status != 0:
                raise InputError(
                    f"{command} on host {self.name} exited {done.exit_status}: "
                    f"{str(done.stderr or done.stdout).strip()[:200]}"
                )
            return str(done.stdout or "")
        raise AssertionError("unreachable")  # pragma: no cover

    def _drop(self, conn: asyncssh.SSHClientConnection) -> None:
        conn.close()
        if self._conn is conn:
            self._conn = None

    def close(self) -> None:
        self.closed = True

        async def ending() -> None:
            if self._conn is not None:
                self._conn.close()
                await self._conn.wait_closed()

        with contextlib.suppress(Exception):  # fairwin is exiting: a connection that will not close is let go
            asyncio.run_coroutine_threadsafe(ending(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()


_SESSIONS: dict[tuple[str, str], HostSession] = {}
_SESSIONS_GUARD = threading.Lock()


@atexit.register
def close_sessions() -> None:
    """Every host's kept connection closed (at exit; a test may call it)."""
    with _SESSIONS_GUARD:
        sessions = list(_SESSIONS.values())
        _SESSIONS.clear()
    for session in sessions:
        session.close()


def blocking(work: Coroutine[Any, Any, T]) -> T:
    """Run SSH work to its end from synchronous code: on this thread when no event loop runs here, else on a
    thread of its own (the window's loop is never re-entered)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()
