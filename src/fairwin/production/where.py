"""Where production runs, its commands run and its processes are looked for: here, or on its host over SSH.

A production managed elsewhere (``up``/``down``: systemd, a container runtime) often
lives on a GPU host fairwin does not run on. With ``[production] host``, its commands
run there over SSH and ``must_not_run`` is checked in that host's process table; the
port and health proofs are network checks and work from anywhere. A production
**role** on a host (``roles.P.host``) is launched there detached, as here: ``setsid
--fork`` over SSH, its pid file and log in ``remote_dir`` on the host, stopped by its
process group over SSH.
"""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Protocol

from fairwin.commands import Retry, runner
from fairwin.errors import LaunchError, ProductionError
from fairwin.plan.hosts import Host
from fairwin.production.detached import PID_WAIT_S, command_of, launch_detached
from fairwin.production.proof import pid_alive, running, start_ticks, stop_group

#: Written into production.log before each launch: what the server logs after the last one is this launch's own.
LAUNCH_MARK = "fairwin: production launched here"

COMMAND_TIMEOUT_S = 300.0


class Where(Protocol):
    label: str  # "" here; " on host NAME" there

    async def run(self, what: str, argv: list[str]) -> str: ...

    async def running(self, patterns: list[str]) -> list[str]: ...

    async def launch(self, argv: list[str], declared: dict[str, str], env: dict[str, str], cwd: Path | None) -> int:
        """Launch production detached (``env``: its whole environment here; ``declared``: what a remote host's
        login environment is given on top); its pid, which is its process group's id."""

    async def command_of(self, pid: int) -> list[str]: ...

    async def alive(self, pid: int) -> bool: ...

    async def started(self, pid: int) -> int | None:
        """When the process started (clock ticks after boot; None when it cannot be read): a pid's identity."""

    async def stop_group(self, pid: int, grace_s: float) -> str: ...

    async def launched_pid(self) -> int | None:
        """The pid the last launch's own pid file holds (what survives a fairwin that died right after it)."""


def _failed(what: str, argv: list[str], code: int | None, output: str, label: str) -> ProductionError:
    tail = output.strip().splitlines()[-1:]
    return ProductionError(f"production {what} command {shlex.join(argv)}{label} exited {code}: {tail}")


class Here:
    label = ""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir

    async def launch(self, argv: list[str], declared: dict[str, str], env: dict[str, str], cwd: Path | None) -> int:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with (self.state_dir / "production.log").open("a") as log:
            log.write(f"{LAUNCH_MARK}\n")
        return launch_detached(argv, env=env, cwd=cwd, state_dir=self.state_dir, name="production")

    async def command_of(self, pid: int) -> list[str]:
        return command_of(pid)

    async def alive(self, pid: int) -> bool:
        return pid_alive(pid)

    async def started(self, pid: int) -> int | None:
        try:
            return start_ticks(Path(f"/proc/{pid}/stat").read_text())
        except OSError:
            return None

    async def stop_group(self, pid: int, grace_s: float) -> str:
        return await stop_group(pid, pid, grace_s)

    async def launched_pid(self) -> int | None:
        path = self.state_dir / "production.pid"
        text = path.read_text().strip() if path.exists() else ""
        return int(text) if text.isdigit() else None

    async def run(self, what: str, argv: list[str]) -> str:
        try:
            done = await runner().run_async(argv, timeout_s=COMMAND_TIMEOUT_S, merge_stderr=True)
        except (OSError, TimeoutError) as exc:
            raise ProductionError(f"production {what} command {argv[0]!r} could not run: {exc}") from None
        if done.status != 0:
            raise _failed(what, argv, done.status, done.out, self.label)
        return f"ran: {shlex.join(argv)}"

    async def running(self, patterns: list[str]) -> list[str]:
        return running(patterns)


class OverSsh:
    def __init__(self, name: str, host: Host, remote_dir: str = ".fairwin/production") -> None:
        self.name, self.host = name, host
        self.label = f" on host {name}"
        # A relative directory is under the login's home; "$HOME" is left for the host's shell to expand.
        quoted = shlex.quote(remote_dir)
        self.dir = quoted if remote_dir.startswith("/") else f'"$HOME"/{quoted}'

    async def _run(self, command: str, retry: Retry = "read") -> tuple[int | None, str]:
        """The command on production's host: its status and output. A read unless it says otherwise."""
        from fairwin.launch.ssh import run_once  # asyncssh only where a host is used

        try:
            done = await run_once(self.name, self.host, command, COMMAND_TIMEOUT_S, retry=retry)
        except LaunchError as exc:
            raise ProductionError(str(exc)) from None
        return done.exit_status, str(done.stdout or "") + str(done.stderr or "")

    async def run(self, what: str, argv: list[str]) -> str:
        code, output = await self._run(shlex.join(argv), "action")
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

    async def launch(self, argv: list[str], declared: dict[str, str], env: dict[str, str], cwd: Path | None) -> int:
        """``setsid --fork`` on the host: production outlives the SSH session, with exactly its declared
        environment on the host's login one (``env -i``, as a role's server there)."""
        del env  # fairwin's own environment means nothing on another host
        code, login = await self._run("env -0")  # NUL-separated: a value may hold a newline
        base = dict(item.split("=", 1) for item in login.split("\0") if "=" in item) if code == 0 else {}
        for key in ("SHLVL", "_", "PWD", "OLDPWD"):
            base.pop(key, None)
        whole = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted({**base, **declared}.items()))
        cd = f"cd {shlex.quote(str(cwd))} && " if cwd is not None else ""
        wrapper = shlex.quote('echo $$ > "$0"; exec "$@"')
        code, output = await self._run(
            f"mkdir -p {self.dir} && rm -f {self.dir}/production.pid && "
            f"echo {shlex.quote(LAUNCH_MARK)} >> {self.dir}/production.log && {cd}setsid --fork sh -c {wrapper} "
            f"{self.dir}/production.pid env -i {whole} {shlex.join(argv)} >> {self.dir}/production.log 2>&1 "
            "< /dev/null",
            "action",
        )
        if code != 0:
            raise ProductionError(f"production could not be launched{self.label}: {output.strip()[:200]}")
        deadline = asyncio.get_running_loop().time() + PID_WAIT_S
        while (pid := await self.launched_pid()) is None:
            if asyncio.get_running_loop().time() >= deadline:
                raise ProductionError(f"production did not start{self.label}: no pid in {self.dir}/production.pid")
            await asyncio.sleep(0.1)
        return pid

    async def command_of(self, pid: int) -> list[str]:
        code, output = await self._run(f"cat /proc/{pid}/cmdline")
        return [a for a in output.split("\0") if a] if code == 0 else []

    async def alive(self, pid: int) -> bool:
        code, output = await self._run(f"ps -o stat= -p {pid}")
        return code == 0 and bool(output.strip()) and not output.strip().startswith("Z")

    async def started(self, pid: int) -> int | None:
        code, output = await self._run(f"cat /proc/{pid}/stat")
        return start_ticks(output) if code == 0 else None

    async def stop_group(self, pid: int, grace_s: float) -> str:
        from fairwin.launch.ssh import connect, stop_remote_group  # asyncssh only where a host is used

        try:
            conn = await connect(self.name, self.host)
        except LaunchError as exc:
            raise ProductionError(str(exc)) from None
        try:
            return await stop_remote_group(conn, pid, grace_s)
        finally:
            conn.close()

    async def launched_pid(self) -> int | None:
        code, output = await self._run(f"cat {self.dir}/production.pid 2>/dev/null")
        return int(output.strip()) if code == 0 and output.strip().isdigit() else None
