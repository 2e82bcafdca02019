from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests import forked


def processes_with(marker: str) -> list[int]:
    """Pids whose command line holds marker's words, in order, as whole words; a one-word marker (a served-model
    name unique to the test) also holds its family, ``span-dead`` the words ``span-dead-a`` and ``span-dead-worker``.
    Whole words: a substring matched other tests' processes running beside it ("win-a" in a Slurm step's job name
    ``fairwin-a1b2c3``)."""
    wanted = marker.split()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").split()
        except OSError:
            continue
        if any("pytest" in word for word in words):
            continue
        if len(wanted) == 1:
            holds = any(word == marker or word.startswith(f"{marker}-") for word in words)
        else:
            holds = any(words[i : i + len(wanted)] == wanted for i in range(len(words) - len(wanted) + 1))
        if holds:
            pids.append(int(entry.name))
    return pids


def servers_with(marker: str) -> list[int]:
    """:func:`processes_with`, less the shell fairwin keeps a remote server's pid and exit status with (its
    command line holds the server's)."""
    wrapper = '"$0/group"'
    found = []
    for pid in processes_with(marker):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if wrapper not in cmdline:
            found.append(pid)
    return found


#: Every fairwin command a test runs starts a session of its own, as one typed in a terminal does: the kernel's
#: autogroup scheduling then shares the CPUs between it and the test workers (with the suite's hogs, HOG=N) as
#: between a user's fairwin and a neighbour's jobs. In the workers' session, its client's event loop waited in
#: the run queue behind three other workers and was rightly untrusted (a WIN asserted came out INCONCLUSIVE).
OWN_SESSION = True


def fairwin(
    *args: str, timeout: float = 300, cwd: Path | None = None, columns: int = 200
) -> subprocess.CompletedProcess[str]:
    """``python -m fairwin ARGS`` to its end, as a process of its own (tests/forked.py)."""
    env = {**os.environ, "COLUMNS": str(columns)}
    return forked.run(list(args), env=env, cwd=cwd, timeout=timeout, new_session=OWN_SESSION)


def only_window(plan: Path) -> Path:
    windows = [p for p in (plan.parent / "windows").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(windows) == 1, windows
    return windows[0]


def status(window: Path) -> dict[str, Any]:
    return json.loads((window / "status.json").read_text())


def wait_healthy(url: str, timeout: float = 20) -> None:
    """Until ``url`` answers (a server's health path)."""
    import time
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} never answered")


class SimProcess:
    """`fairwin sim` as a child process on a free loopback port."""

    def __init__(self, *flags: str) -> None:
        from tests.ports import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "fairwin", "sim", "--port", str(self.port), *flags],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def wait_healthy(self, timeout: float = 20) -> None:
        wait_healthy(self.url + "/health", timeout)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)
