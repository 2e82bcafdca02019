"""Processes that outlive fairwin: production, and the placeholders that hold the hardware between windows.

``setsid --fork`` makes the process the leader of a session of its own whose parent is
init, so it survives the window that started it (fairwin ending, killed, an ssh
session lost) and is never fairwin's zombie. A tiny ``sh`` wrapper writes its own pid
and then becomes the command (``exec``), so the pid written is the command's, and the
id of its process group too: stopping it signals the whole group.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import psutil

from fairwin.commands import runner
from fairwin.errors import ProductionError

PID_WAIT_S = 10.0


def launch_detached(argv: list[str], *, env: dict[str, str], cwd: Path | None, state_dir: Path, name: str) -> int:
    """Start ``argv`` detached, its output appended to ``state_dir/NAME.log``; returns its pid (= its group's)."""
    setsid = shutil.which("setsid")
    if setsid is None:
        raise ProductionError(f"cannot launch {name} detached: `setsid` (util-linux) is not installed")
    state_dir.mkdir(parents=True, exist_ok=True)
    pid_file = state_dir / f"{name}.pid"
    pid_file.unlink(missing_ok=True)
    wrapper = ["sh", "-c", 'echo $$ > "$0"; exec "$@"', str(pid_file), *argv]
    with (state_dir / f"{name}.log").open("ab") as log:
        forked = runner().run([setsid, "--fork", *wrapper], env=env, cwd=cwd, output=log)
    if forked.status != 0:
        raise ProductionError(f"cannot launch {name} detached: setsid exited {forked.status} (see {log.name})")
    deadline = time.monotonic() + PID_WAIT_S
    while not pid_file.exists() or not pid_file.read_text().strip():
        if time.monotonic() >= deadline:
            raise ProductionError(f"{name} did not start: no pid in {pid_file}")
        time.sleep(0.02)
    return int(pid_file.read_text())


def command_of(pid: int) -> list[str]:
    """The command line a pid runs now; empty when it is gone or cannot be read."""
    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return []
