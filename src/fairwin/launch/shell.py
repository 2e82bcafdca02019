"""One shell command on a role's host: here as a child process, or over SSH on a ``[hosts.NAME]``."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import Mapping, Sequence

from fairwin.errors import HostUnreachable
from fairwin.plan.hosts import Host

TIMEOUT_S = 30.0


async def shell(host_name: str | None, host: Host | None, command: str) -> tuple[int, str]:
    """Its exit status and output (stdout; a command that wants stderr too says ``2>&1``)."""
    if host_name is None or host is None:
        code, out, _ = await run_to_exit(["sh", "-c", command], TIMEOUT_S)  # the loop runs on meanwhile
        return code, out
    from fairwin.launch.ssh import run_once  # asyncssh only where a host is used

    # Every command run here only reads: one whose connection dropped is run again, with backoff, for as long
    # as the host's reconnect_s allows (a blip must not fail a check the server would pass).
    t0, delay = time.monotonic(), 0.5
    while True:
        try:
            remote = await run_once(host_name, host, command, TIMEOUT_S)
            if remote.exit_status is not None or remote.exit_signal is not None:
                break
            failure: HostUnreachable | None = None
        except HostUnreachable as exc:
            failure = exc
        left = host.reconnect_s - (time.monotonic() - t0)
        if left <= 0:
            if failure is not None:
                raise failure
            break
        await asyncio.sleep(min(delay, left))
        delay = min(delay * 2, 5.0)
    return (remote.exit_status if remote.exit_status is not None else -1), str(remote.stdout or "")


async def run_to_exit(
    argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None, merge_stderr: bool = False
) -> tuple[int, str, str]:
    """A command here, to its exit: (status, stdout, stderr; with ``merge_stderr`` stderr is in stdout).

    Its output goes to files, read once it has exited, not to pipes read to their end: a daemon it leaves
    running (conmon behind ``podman run -d``, a server behind a start script) may hold its copy of them, and
    the end would never come (on uvloop's loop the runtime's own ends of libuv's socket pairs reached conmon,
    and ``podman run -d`` waited 120 s). FileNotFoundError when ``argv[0]`` is missing; TimeoutError after
    ``timeout_s``, the command killed."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = await asyncio.create_subprocess_exec(
            *argv,
            env=None if env is None else dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=out if merge_stderr else err,
        )
        try:
            code = await asyncio.wait_for(process.wait(), timeout_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise
        out.seek(0)
        err.seek(0)
        return code, out.read().decode(errors="replace"), err.read().decode(errors="replace")
