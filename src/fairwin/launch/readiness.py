"""When a role's worker is ready for the next process to start: a log line, a port, time alive.

A worker of a multi-node server (a vLLM ``--headless`` engine, a Ray worker) has no
health URL of its own; the head is what answers. So each worker is waited on with the
checks its plan declares, all of which must pass, and fails fast when it exits or its
SSH connection is lost first.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from pathlib import Path
from typing import Protocol

from fairwin.errors import HealthTimeoutError, ServerExitedError
from fairwin.plan.roles import Ready

POLL_S = 0.1
CONNECT_TIMEOUT_S = 1.0


class Running(Protocol):
    def exit_code(self) -> int | None: ...

    def problem(self) -> str | None: ...


class LogWatch:
    """Whether a pattern has appeared in a growing log, reading only what was appended since the last look."""

    def __init__(self, path: Path, pattern: str) -> None:
        self.path, self.pattern = path, re.compile(pattern)
        self.offset, self.tail, self.seen = 0, "", False

    def found(self) -> bool:
        if self.seen:
            return True
        with contextlib.suppress(OSError), self.path.open("rb") as log:
            log.seek(self.offset)
            chunk = log.read()
            self.offset += len(chunk)
            text = self.tail + chunk.decode("utf-8", "replace")
            self.seen = self.pattern.search(text) is not None
            self.tail = text[-4096:]  # a line split across two reads still matches
        return self.seen


async def accepts(address: str, port: int) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(address, port), CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


async def wait_ready(process: Running, ready: Ready, log_path: Path, label: str, address: str) -> float:
    """Seconds until every declared check passed; ServerExitedError or HealthTimeoutError naming what failed."""
    t0 = time.monotonic()
    watch = LogWatch(log_path, ready.log) if ready.log is not None else None
    while True:
        code, problem = process.exit_code(), process.problem()
        if code is not None or problem is not None:
            why = problem or f"exited with code {code}"
            raise ServerExitedError(f"{label}: {why} before it was ready (log: {log_path})")
        elapsed = time.monotonic() - t0
        missing = []
        if watch is not None and not watch.found():
            missing.append(f"no line matching {ready.log!r} in its output yet")
        if ready.port is not None and not await accepts(address, ready.port):
            missing.append(f"{address}:{ready.port} does not accept connections")
        if elapsed < ready.after_s:
            missing.append(f"alive {elapsed:.1f} s of {ready.after_s:g} s")
        if not missing:
            return elapsed
        if elapsed >= ready.timeout_s:
            raise HealthTimeoutError(
                f"{label}: not ready after {ready.timeout_s:g} s ({'; '.join(missing)}); "
                f"check its ready checks or raise ready.timeout_s (log: {log_path})"
            )
        await asyncio.sleep(POLL_S)
