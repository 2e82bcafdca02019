"""One shell command on a role's host: here as a child process (fairwin/commands.py), over SSH on a
``[hosts.NAME]`` (launch/ssh.py), with the caller's :data:`~fairwin.commands.Retry` rule, or on a node of the
window's Slurm job as a step of it (srun: launch/scheduler.py)."""

from __future__ import annotations

from fairwin.commands import Retry, runner
from fairwin.launch.scheduler import srun_argv
from fairwin.plan.hosts import Place, SlurmNode

TIMEOUT_S = 30.0


async def shell(host_name: str | None, host: Place | None, command: str, *, retry: Retry) -> tuple[int, str]:
    """Its exit status (-1: none came) and output (stdout; a command that wants stderr too says ``2>&1``)."""
    if host_name is None or host is None or isinstance(host, SlurmNode):
        argv = ["sh", "-c", command]
        if isinstance(host, SlurmNode):  # srun's status is the command's; srun's own failure is its 1 with words
            argv = srun_argv(host.job_id, host.node, argv)
        done = await runner().run_async(argv, timeout_s=TIMEOUT_S, merge_stderr=False)
        return done.status, done.out
    from fairwin.launch.ssh import run_once  # asyncssh only where a host is used

    remote = await run_once(host_name, host, command, TIMEOUT_S, retry=retry)
    return (remote.exit_status if remote.exit_status is not None else -1), str(remote.stdout or "")
