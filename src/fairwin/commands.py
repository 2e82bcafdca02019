"""Running a command on this machine: the one place fairwin starts a process.

Every module that runs a command here asks this module (a command on a host goes through
launch/ssh.py, the seam's other half, and launch/shell.py chooses between the two). The work
is done by a :class:`Runner`; :func:`using` swaps it for a test's own, the way httpx's tests
inject a transport, so a test can answer ``git`` or ``nvidia-smi`` without either installed
and assert exactly which commands ran.

Whether a command may be run again after its connection was lost is said where it is run, as
a :data:`Retry`: a read asks and changes nothing, so it is asked again on a new connection; an
action (a launch, a stop, a write) is never re-run blindly. Here no connection can be lost,
and the distinction matters on a host (launch/ssh.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal, Protocol

#: ``read``: changes nothing, asked again on a new connection when one is lost; ``action``: never re-run blindly.
Retry = Literal["read", "action"]


@dataclass(frozen=True)
class Ran:
    """A command that ran to its exit: its status and what it wrote (``err`` empty when it went to ``out``)."""

    status: int
    out: str
    err: str = ""


class Runner(Protocol):
    """What starts processes here. Missing commands raise FileNotFoundError (an OSError); a command past its
    ``timeout_s`` is killed and raises TimeoutError."""

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        output: IO[bytes] | None = None,
    ) -> Ran:
        """Blocking, to its exit, stdin closed; with ``output``, stdout and stderr go there (``Ran.out`` is then
        empty)."""
        ...

    async def run_async(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout_s: float, merge_stderr: bool
    ) -> Ran:
        """To its exit, the event loop running on meanwhile."""
        ...

    async def stream(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> asyncio.subprocess.Process:
        """Started with stdout (stderr merged) on a pipe, for a caller that follows it as it comes."""
        ...

    def spawn(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None, cwd: Path | None, output: IO[bytes]
    ) -> subprocess.Popen[bytes]:
        """Started in a session of its own (its process group reaches its children), stdin closed, its stdout and
        stderr to ``output``: a server that runs on."""
        ...


class Subprocesses:
    """The real :class:`Runner`: child processes of fairwin."""

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        output: IO[bytes] | None = None,
    ) -> Ran:
        kept = dict(env) if env is not None else None
        try:
            if output is not None:
                done = subprocess.run(
                    list(argv),
                    cwd=cwd,
                    env=kept,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    timeout=timeout_s,
                )
                return Ran(done.returncode, "")
            text = subprocess.run(
                list(argv),
                cwd=cwd,
                env=kept,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{argv[0]} ran over {timeout_s:g} s") from None
        return Ran(text.returncode, text.stdout, text.stderr)

    async def run_async(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout_s: float, merge_stderr: bool
    ) -> Ran:
        # Its output goes to files, read once it has exited, not to pipes read to their end: a daemon it leaves
        # running (conmon behind `podman run -d`, a server behind a start script) may hold its copy of them, and
        # the end would never come (on uvloop's loop the runtime's own ends of libuv's socket pairs reached
        # conmon, and `podman run -d` waited 120 s).
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
            return Ran(code, out.read().decode(errors="replace"), err.read().decode(errors="replace"))

    async def stream(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *argv,
            env=None if env is None else dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )

    def spawn(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None, cwd: Path | None, output: IO[bytes]
    ) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            list(argv),
            env=None if env is None else dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


_SUBPROCESSES = Subprocesses()
_RUNNER: ContextVar[Runner | None] = ContextVar("fairwin_runner", default=None)


def runner() -> Runner:
    """The runner in use: :class:`Subprocesses`, unless a test said otherwise (:func:`using`)."""
    return _RUNNER.get() or _SUBPROCESSES


@contextlib.contextmanager
def using(replacement: Runner) -> Iterator[Runner]:
    """Every command run here inside the block (asyncio tasks and ``to_thread`` calls made from it too) goes to
    ``replacement``."""
    token = _RUNNER.set(replacement)
    try:
        yield replacement
    finally:
        _RUNNER.reset(token)
