"""Where production's commands run and its processes are looked for: here, or on its host over SSH.

A production managed elsewhere (``up``/``down``: systemd, a container runtime) often
lives on a GPU host fairwin does not run on. With ``[production] host``, its commands
run there over SSH and ``must_not_run`` is checked in that host's process table; the
port and health proofs are network checks and work from anywhere.
"""

from __future__ import annotations

import asyncio
import shlex
from typing import Protocol

from fairwin.errors import LaunchError, ProductionError
from fairwin.plan.hosts import Host
from fairwin.production.proof import running

COMMAND_TIMEOUT_S = 300.0


class Where(Protocol):
    label: str  # "" here; " on host NAME" there

    async def run(self, what: str, argv: list[str]) -> str: ...

    async def running(self, patterns: list[str]) -> list[str]: ...


def _failed(what: str, argv: list[str], code: int | None, output: str, label: str) -> ProductionError:
    tail = output.strip().splitlines()[-1:]
    return ProductionError(f"production {what} command {shlex.join(argv)}{label} exited {code}: {tail}")


class Here:
    label = ""

    async def run(self, what: str, argv: list[str]) -> str:
        try:
            process = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                           stderr=asyncio.subprocess.STDOUT)  # fmt: skip
            output, _ = await asyncio.wait_for(process.communicate(), COMMAND_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise ProductionError(f"production {what} command {argv[0]!r} could not run: {exc}") from None
        if process.returncode != 0:
            raise _failed(what, argv, process.returncode, output.decode(errors="replace"), self.label)
        return f"ran: {shlex.join(argv)}"

    async def running(self, patterns: list[str]) -> list[str]:
        return running(patterns)


class OverSsh:
    def __init__(self, name: str, host: Host) -> None:
        self.name, self.host = name, host
        self.label = f" on host {name}"

    async def _run(self, command: str) -> tuple[int | None, str]:
        from fairwin.launch.ssh import run_once  # asyncssh only where a host is used

        try:
            done = await run_once(self.name, self.host, command, COMMAND_TIMEOUT_S)
        except LaunchError as exc:
            raise ProductionError(str(exc)) from None
        return done.exit_status, str(done.stdout or "") + str(done.stderr or "")

    async def run(self, what: str, argv: list[str]) -> str:
        code, output = await self._run(shlex.join(argv))
        if code != 0:
            raise _failed(what, argv, code, output, self.label)
        return f"ran{self.label}: {shlex.join(argv)}"

    async def running(self, patterns: list[str]) -> list[str]:
        """'pid: command line' of every process on the host whose command line holds a pattern (the ps that
        lists them, and the shell that runs it, never do)."""
        if not patterns:
            return []
        code, output = await self._run("ps -eo pid=,args=")
        if code != 0:
            raise ProductionError(f"cannot list the processes on host {self.name}: {output.strip()[:200]}")
        found = []
        for line in output.splitlines():
            pid, _, command = line.strip().partition(" ")
            if any(p in command for p in patterns) and "ps -eo pid=,args=" not in command:
                found.append(f"{pid}: {command.strip()[:200]}")
        return found
