"""A clock watchdog's own log, on each host, as a source of dial-backs and re-locks.

Some teams run a watchdog that re-locks the GPU clock or dials it back (for heat, for power, on
a schedule), and it logs what it does. A re-lock that comes and goes between two samples is
invisible to NVML and nvidia-smi; the watchdog's log is not. The plan names each host's log
(``telemetry.watchdog_logs``): its size is marked when the window is admitted, before the
take-down, and every line added after the mark that ``watchdog_pattern`` matches is an event of
the window, read at its decision. A log that cannot be read is never taken as a quiet one: it
refuses the window at admission, and at the decision it is a condition of its own.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from fairwin.errors import LaunchError
from fairwin.launch.shell import shell
from fairwin.plan.site import Site
from fairwin.telemetry.gpu import HERE

#: The most lines of one host's log a decision quotes (all are counted).
QUOTED = 5


async def _run(site: Site, host: str, command: str) -> tuple[int, str]:
    """``command`` on the watchdog's host (here, or over SSH): its status and output; 255 where it cannot run."""
    where = None if host == HERE else site.host(host)
    try:
        return await shell(None if host == HERE else host, where, command, retry="read")
    except (LaunchError, OSError, subprocess.SubprocessError) as exc:
        return 255, str(exc)


def _path(site: Site, host: str) -> str:
    """The host's log, quoted for its shell; relative: to the plan here, to the login's home on a host."""
    path = site.plan.telemetry.watchdog_logs[host]
    return shlex.quote(str(site.resolve(Path(path))) if host == HERE else path)


async def _size(site: Site, host: str) -> int | str:
    """The log's size in bytes, or why it cannot be read."""
    status, out = await _run(site, host, f"{{ wc -c < {_path(site, host)}; }} 2>&1")
    out = out.strip()
    return int(out) if status == 0 and out.isdigit() else out or f"wc exited {status}"


async def _added(site: Site, host: str, mark: int) -> str:
    """Everything written after ``mark`` (the whole log where it shrank: rotated); OSError when unreadable."""
    log = _path(site, host)
    command = f"if [ $(wc -c < {log}) -ge {mark} ]; then tail -c +{mark + 1} {log}; else cat {log}; fi 2>&1"
    status, out = await _run(site, host, command)
    if status != 0:
        raise OSError(out.strip() or f"exited {status}")
    return out


async def mark(site: Site) -> tuple[dict[str, int], list[str]]:
    """Each host's watchdog log's size now, and each log that cannot be read (its dial-backs would go unseen)."""
    marks: dict[str, int] = {}
    unread: list[str] = []
    for host, path in sorted(site.plan.telemetry.watchdog_logs.items()):
        size = await _size(site, host)
        if isinstance(size, str):
            unread.append(
                f"telemetry.watchdog_logs.{host}: {path} cannot be read on {host} ({size}); its dial-backs would "
                "go unseen: fix the path, or remove the key"
            )
        else:
            marks[host] = size
    return marks, unread


async def events(site: Site, marks: dict[str, int]) -> dict[str, list[str]]:
    """Each host's lines added since its mark that the pattern matches (quoted up to :data:`QUOTED`, then a
    count), or the reason its log could not be read: an unread log is an event too, never a quiet one."""
    pattern = re.compile(site.plan.telemetry.watchdog_pattern)
    found: dict[str, list[str]] = {}
    for host, at in sorted(marks.items()):
        path = site.plan.telemetry.watchdog_logs[host]
        try:
            added = await _added(site, host, at)
        except OSError as exc:
            found[host] = [f"its log {path} could not be read at the decision ({exc})"]
            continue
        lines = [line.strip() for line in added.splitlines() if line.strip() and pattern.search(line)]
        if len(lines) > QUOTED:
            lines = [*lines[:QUOTED], f"and {len(lines) - QUOTED} more"]
        if lines:
            found[host] = lines
    return found
