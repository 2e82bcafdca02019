"""One shell command on a role's host: here as a child process, or over SSH on a ``[hosts.NAME]``."""

from __future__ import annotations

import asyncio
import subprocess
import time

from fairwin.errors import HostUnreachable
from fairwin.plan.hosts import Host

TIMEOUT_S = 30.0


async def shell(host_name: str | None, host: Host | None, command: str) -> tuple[int, str]:
    """Its exit status and output (stdout; a command that wants stderr too says ``2>&1``)."""
    if host_name is None or host is None:
        done = subprocess.run(["sh", "-c", command], capture_output=True, timeout=TIMEOUT_S, check=False)
        return done.returncode, done.stdout.decode(errors="replace")
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
