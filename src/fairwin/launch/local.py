"""The local launcher: a role's server as a child process in its own process group.

Output goes to a log file, never to a pipe nobody reads (a full pipe stalls the
server mid-measurement). Stopping signals the whole group, SIGTERM first and
SIGKILL after the role's grace period, so engine worker processes die with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import aiohttp

from fairwin.commands import runner
from fairwin.directory.start_receipt import ContainerReceipt, StopRecord
from fairwin.errors import HealthTimeoutError, LaunchError, ServerExitedError
from fairwin.launch.spec import LaunchSpec
from fairwin.redaction import scrub, scrub_file

HEALTH_POLL_S = 0.1
LOG_TAIL_BYTES = 2000
#: What a server reports while it runs, for the window to journal: a remote one's connection re-established.
Note = Callable[[Literal["reconnected"], dict[str, Any]], None]


def read_process_env(pid: int) -> dict[str, str] | None:
    """The environment a process is running with; None where /proc cannot tell."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in pairs}


def last_log_line(path: Path) -> str:
    """The last line a server logged (secrets hidden); empty when there is none."""
    try:
        data = path.read_bytes()[-LOG_TAIL_BYTES:]
    except OSError:
        return ""
    lines = scrub(data.decode("utf-8", "replace")).strip().splitlines()
    return lines[-1] if lines else ""


async def health_answer(session: aiohttp.ClientSession, url: str) -> str | None:
    """None when ``url`` answers 200; else what came instead (an HTTP status, or the error)."""
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=2.0)) as response:
            return None if response.status == 200 else f"HTTP {response.status}"
    except (TimeoutError, aiohttp.ClientError) as exc:
        return str(exc) or type(exc).__name__


def refuse_when_late(spec: LaunchSpec, started: float, last: str, log_path: Path) -> None:
    """HealthTimeoutError once the role's startup deadline has passed, with the last answer and the log."""
    if time.monotonic() - started >= spec.startup_timeout_s:
        raise HealthTimeoutError(
            f"{spec.label}: {spec.health_url} not healthy after {spec.startup_timeout_s:g} s ({last}); check "
            f"base_url/port or raise startup_timeout_s (log: {log_path})"
        )


@dataclass
class LocalServer:
    """One running server. Use :meth:`start`, :meth:`wait_healthy`, and always :meth:`stop` (or, outside an
    event loop, :meth:`launch` and :meth:`terminate`)."""

    spec: LaunchSpec
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    started_unix: float = 0.0
    healthy_after_s: float | None = None
    stop_record: StopRecord | None = field(default=None)
    autogroup: str | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def listens_as(self) -> int | None:
        return self.pid

    @property
    def scheduling(self) -> dict[str, object] | None:
        """The CPU set and priority applied, read back from the kernel now (after start: the server's own)."""
        pid = self.process.pid if self.process is not None else None
        return self.spec.scheduling.record(pid, self.autogroup)

    async def start(self) -> None:
        self.launch()

    async def stop(self) -> StopRecord:
        """:meth:`terminate` off the event loop: the grace period is waited in a thread, and a cancellation of
        the caller meanwhile does not cut the stop short (the thread finishes it)."""
        return await asyncio.to_thread(self.terminate)

    def command(self) -> list[str]:
        """What is run: the role's argv behind its CPU set and priority."""
        return [*self.spec.scheduling.command_prefix(self.spec.role_name), *self.spec.argv]

    def launch(self) -> None:
        """Start the server (the blocking form of :meth:`start`)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            try:  # in a session of its own: its process group, so stop() reaches its workers
                self.process = runner().spawn(self.command(), env=self.spec.env, cwd=self.spec.cwd, output=log)
            except OSError as exc:
                raise LaunchError(
                    f"{self.spec.label}: cannot run {self.spec.argv[0]!r}: {exc.strerror}; fix the role's argv"
                ) from None
        self.started_unix = time.time()
        self.autogroup = self.spec.scheduling.apply_to_session(self.process.pid)

    async def process_env(self) -> dict[str, str] | None:
        return read_process_env(self.process.pid) if self.process is not None else None

    @property
    def expected_env(self) -> dict[str, str]:
        """The environment the server should run with: the declared one, on fairwin's own."""
        return self.spec.env

    def problem(self) -> str | None:
        """Why the server can no longer be trusted though it may still answer (never, for a local child)."""
        return None

    def report_to(self, note: Note) -> None:
        del note  # nothing happens to it that the start does not see itself

    def described(self) -> ContainerReceipt | None:
        return None  # a plain process: its receipt is its argv and pid

    def exit_code(self) -> int | None:
        return self.process.poll() if self.process is not None else None

    def log_tail(self) -> str:
        return last_log_line(self.log_path)

    async def wait_healthy(self, session: aiohttp.ClientSession) -> float:
        """Poll the health path until 200; fail fast if the process exits."""
        assert self.process is not None, "start() first"
        t0 = time.monotonic()
        while True:
            code = self.process.poll()
            if code is not None:
                raise ServerExitedError(
                    f"{self.spec.label}: server exited with code {code} before it was healthy; "
                    f"last log line: {self.log_tail()!r} (log: {self.log_path})"
                )
            last = await health_answer(session, self.spec.health_url)
            if last is None:
                self.healthy_after_s = time.monotonic() - t0
                return self.healthy_after_s
            refuse_when_late(self.spec, t0, last, self.log_path)
            await asyncio.sleep(HEALTH_POLL_S)

    def terminate(self) -> StopRecord:
        """SIGTERM the group, then SIGKILL after the grace period. Safe to call twice."""
        if self.stop_record is not None:
            return self.stop_record
        t0 = time.monotonic()
        process = self.process
        if process is None:
            self.stop_record = StopRecord(signal="none", returncode=None, seconds=0.0)
            return self.stop_record
        sent = "none"
        if process.poll() is None:
            sent = "SIGTERM"
            signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=self.spec.stop_timeout_s)
            except subprocess.TimeoutExpired:
                sent = "SIGKILL"
                signal_group(process.pid, signal.SIGKILL)
                process.wait()
        elif group_alive(process.pid):  # its leader exited, leaving a server it started (a wrapper that forked)
            sent = "SIGTERM"
            signal_group(process.pid, signal.SIGTERM)
            if not wait_group_gone(process.pid, self.spec.stop_timeout_s):
                sent = "SIGKILL"
        # Workers that ignored SIGTERM after their leader exited must not outlive the start.
        signal_group(process.pid, signal.SIGKILL)
        self.stop_record = StopRecord(signal=sent, returncode=process.returncode, seconds=time.monotonic() - t0)
        scrub_file(self.log_path)  # the server wrote its log itself: a secret it printed is hidden now it stopped
        return self.stop_record


def group_alive(pgid: int) -> bool:
    """Some process of the group still runs (or may: one we may not signal counts as running)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_group_gone(pgid: int, timeout_s: float) -> bool:
    """Whether the whole group is gone within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(HEALTH_POLL_S)
    return True


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Signal a whole process group; one already gone, or not ours to signal, is left alone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
