"""Proofs about the hardware, from outside: a port that refuses, processes that do not run.

A port is proved free only by a refused connection: a timeout proves nothing (a
firewall, a server too busy to accept), so it is reported as not proved. Processes
are matched by a substring of their command line, as an operator would ``pgrep -f``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from fairwin.launch.local import signal_group

CONNECT_TIMEOUT_S = 1.0
STOP_POLL_S = 0.1


def host_port(base_url: str) -> tuple[str, int]:
    parts = urlsplit(base_url)
    default = 443 if parts.scheme == "https" else 80
    return parts.hostname or "127.0.0.1", parts.port or default


def port_state(base_url: str) -> str:
    """'refused' (nothing listens), 'open' (something accepted) or 'unknown' (no answer either way)."""
    try:
        with socket.create_connection(host_port(base_url), timeout=CONNECT_TIMEOUT_S):
            return "open"
    except ConnectionRefusedError:
        return "refused"
    except OSError:
        return "unknown"


def running(patterns: Sequence[str]) -> list[str]:
    """'pid: command line' of every process (not this one) whose command line contains a pattern."""
    if not patterns:
        return []
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        if process.info["pid"] == os.getpid() or not process.info["cmdline"]:
            continue
        command = " ".join(process.info["cmdline"])
        if any(pattern in command for pattern in patterns):
            found.append(f"{process.info['pid']}: {command[:200]}")
    return found


def pid_alive(pid: int) -> bool:
    """The process runs (a zombie does not; one we may not signal does)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie is not running production
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] != "Z"
    return True


def start_ticks(stat: str) -> int | None:
    """When a process started, in clock ticks after boot, from its ``/proc/PID/stat`` text (field 22, after the
    parenthesised command name, which may hold spaces): unchanged by an exec, unlike its command line."""
    fields = stat.rsplit(")", 1)[-1].split()
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None


async def stop_group(pgid: int, leader: int, grace_s: float) -> str:
    """SIGTERM a process group, wait up to ``grace_s`` for its leader to go, then SIGKILL the group (workers
    that outlived their leader go too). Returns the signal that ended the leader."""
    signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while pid_alive(leader) and time.monotonic() < deadline:
        await asyncio.sleep(STOP_POLL_S)
    sent = "SIGKILL" if pid_alive(leader) else "SIGTERM"
    signal_group(pgid, signal.SIGKILL)
    return sent
