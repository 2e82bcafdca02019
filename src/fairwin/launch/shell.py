"""One shell command on a role's host: here as a child process, or over SSH on a ``[hosts.NAME]``."""

from __future__ import annotations

import subprocess

from fairwin.plan.hosts import Host

TIMEOUT_S = 30.0


async def shell(host_name: str | None, host: Host | None, command: str) -> tuple[int, str]:
    """Its exit status and output (stdout; a command that wants stderr too says ``2>&1``)."""
    if host_name is None or host is None:
        done = subprocess.run(["sh", "-c", command], capture_output=True, timeout=TIMEOUT_S, check=False)
        return done.returncode, done.stdout.decode(errors="replace")
    from fairwin.launch.ssh import run_once  # asyncssh only where a host is used

    remote = await run_once(host_name, host, command, TIMEOUT_S)
    return (remote.exit_status if remote.exit_status is not None else -1), str(remote.stdout or "")
