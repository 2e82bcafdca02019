"""A container runtime's CLI (docker or podman) on a host: here as a child process, or over SSH.

Every container fairwin starts carries labels naming its window, start, role and
member; what a window left behind is found by those labels (``ps --filter label=…``),
not by a pid or a session, on every host the plan's containers run on.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairwin.commands import Retry, runner
from fairwin.errors import LaunchError
from fairwin.plan.container_settings import Container
from fairwin.plan.hosts import Host
from fairwin.plan.site import Site
from fairwin.redaction import scrub_bytes

COMMAND_TIMEOUT_S = 120.0
#: The runtime's commands that only read: asked again on a new connection when one is lost.
READS = frozenset({("ps",), ("inspect",), ("image", "inspect"), ("logs",), ("version",), ("info",)})


@dataclass(frozen=True)
class RuntimeCli:
    """``docker`` or ``podman`` on one host, with the plan's variables for the CLI itself."""

    runtime: str
    env: dict[str, str] = field(default_factory=dict)
    host_name: str | None = None
    host: Host | None = None

    @classmethod
    def of(cls, container: Container, host_name: str | None, host: Host | None) -> RuntimeCli:
        return cls(container.runtime, dict(container.runtime_env), host_name, host)

    @property
    def where(self) -> str:
        return f" on host {self.host_name}" if self.host_name is not None else " here"

    @property
    def key(self) -> tuple[str, str, str | None]:
        """Which engine it talks to: two roles with the same key see the same containers."""
        return self.runtime, repr(sorted(self.env.items())), self.host_name

    def command(self, args: Iterable[str]) -> str:
        """The command line a host's shell runs."""
        prefix = "env " + " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(self.env.items())) + " "
        return (prefix if self.env else "") + shlex.join([self.runtime, *args])

    async def run(self, *args: str, timeout_s: float = COMMAND_TIMEOUT_S) -> tuple[int, str, str]:
        """One runtime command to its end: (exit status, stdout, stderr); 127 when the runtime is not installed
        here, LaunchError when its host cannot be reached or the command outlives ``timeout_s``. On a host, a
        command that only reads (:data:`READS`) is asked again on a new connection; any other is never re-run."""
        if self.host_name is None or self.host is None:
            return await self._run_here(list(args), timeout_s)
        from fairwin.launch.ssh import run_once  # asyncssh only where a host is used

        retry: Retry = "read" if args[:1] in READS or args[:2] in READS else "action"
        done = await run_once(self.host_name, self.host, self.command(args), timeout_s, retry=retry)
        code = done.exit_status if done.exit_status is not None else -1
        return code, str(done.stdout or ""), str(done.stderr or "")

    async def _run_here(self, args: list[str], timeout_s: float) -> tuple[int, str, str]:
        try:
            done = await runner().run_async(
                [self.runtime, *args], env={**os.environ, **self.env}, timeout_s=timeout_s, merge_stderr=False
            )
            return done.status, done.out, done.err
        except FileNotFoundError:
            return 127, "", f"{self.runtime}: not installed here"
        except TimeoutError:
            raise LaunchError(f"`{self.runtime} {shlex.join(args)}`{self.where} took over {timeout_s:g} s") from None

    async def follow(self, args: list[str], log: Path | None = None) -> tuple[int | None, str]:
        """A command that runs on (``logs -f``, ``wait``), its output appended to ``log`` as it comes (scrubbed of
        secrets); its exit status (None: its SSH connection was lost) and its last line."""
        if self.host_name is None or self.host is None:
            process = await runner().stream([self.runtime, *args], env={**os.environ, **self.env})
            try:
                last = await _copy(process.stdout, log)
                return await process.wait(), last
            finally:
                if process.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    await process.wait()
        return await self._follow_there(args, log)

    async def _follow_there(self, args: list[str], log: Path | None) -> tuple[int | None, str]:
        from fairwin.launch.ssh import asyncssh, connect, process_on

        conn = await connect(str(self.host_name), self.host)  # type: ignore[arg-type]
        try:
            process = await process_on(conn, self.command(args), stderr=asyncssh.STDOUT, encoding=None)
            try:
                last = await _copy(process.stdout, log)
            except (asyncssh.Error, OSError):
                return None, ""
            await process.wait()
            return process.exit_status, last
        finally:
            conn.close()

    async def labelled(self, label: str, *, running_only: bool) -> list[str]:
        """Names of the containers carrying ``label`` (``KEY`` or ``KEY=VALUE``); LaunchError when the runtime
        cannot be asked (a check that cannot look does not pass)."""
        every = [] if running_only else ["-a"]
        code, out, err = await self.run("ps", *every, "--filter", f"label={label}", "--format", "{{.Names}}")
        if code != 0:
            raise LaunchError(
                f"cannot list the containers{self.where} ({self.runtime} exited {code}: {err.strip()[-200:]})"
            )
        return sorted(line.strip() for line in out.splitlines() if line.strip())

    async def remove(self, names: list[str], grace_s: float) -> list[str]:
        """Stop (SIGTERM, SIGKILL after ``grace_s``) and remove each container; what was removed, described."""
        removed = []
        for name in names:
            await self.run("stop", "-t", str(max(1, round(grace_s))), name, timeout_s=grace_s + 60.0)
            code, _, _ = await self.run("rm", "-f", name)
            if code == 0:
                removed.append(f"container {name}{self.where}")
        return removed


async def _copy(stream: Any, log: Path | None) -> str:
    """Append a stream to a log file (if any) as it comes; its last non-empty line."""
    last = b""
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") if log is not None else contextlib.nullcontext() as sink:
        async for chunk in stream:
            if sink is not None:
                sink.write(scrub_bytes(chunk))
                sink.flush()
            if chunk.strip():
                last = chunk.strip().splitlines()[-1]
    return str(last.decode(errors="replace"))


def container_clis(site: Site) -> list[RuntimeCli]:
    """One CLI per container engine the site's roles' containers run on: each engine (runtime, its variables,
    its host) once, so that its containers are listed once."""
    plan = site.plan
    found: dict[tuple[str, str, str | None], RuntimeCli] = {}
    for name in site.roles:
        role = plan.roles[name]
        boxes = [(role.container, role.host), *((w.container, w.host) for w in role.workers)]
        for box, host in boxes:
            if box is not None:
                remote = site.where(host)
                cli = RuntimeCli.of(box, host, remote)
                found.setdefault(cli.key, cli)
    return list(found.values())
