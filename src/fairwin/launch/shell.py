"""One shell command on a role's host: here as a child process (fairwin/commands.py), or over SSH on a
``[hosts.NAME]`` (launch/ssh.py), with the caller's :data:`~fairwin.commands.Retry` rule."""

from __future__ import annotations

from fairwin.commands import Retry, runner
from fairwin.plan.hosts import Host

TIMEOUT_S = 30.0


async def shell(host_name: str | None, host: Host | None, command: str, *, retry: Retry) -> tuple[int, str]:
    """Its exit status (-1: none came) and output (stdout; a command that wants stderr too says ``2>&1``)."""
    if host_name is None or host is None:
        done = await runner().run_async(["sh", "-c", command], timeout_s=TIMEOUT_S, merge_stderr=False)
        return done.status, done.out
    from fairwin.launch.ssh import run_once  # asyncssh only where a host is used

    remote = await run_once(host_name, host, command, TIMEOUT_S, retry=retry)
    return (remote.exit_status if remote.exit_status is not None else -1), str(remote.stdout or "")
