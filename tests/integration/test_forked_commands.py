"""The tests' forked fairwin commands (tests/forked.py) against `python -m fairwin`: the same output at the width
their environment asks for, the same exit status and one-line error, relative paths read from their own working
directory, and a command past its timeout killed."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests import forked
from tests.integration.helpers import wait_healthy
from tests.ports import free_port

REPO = Path(__file__).resolve().parents[2]


def both(args: list[str], cwd: Path, columns: int) -> list[subprocess.CompletedProcess[str]]:
    """The command forked, then exec'd, each in its own session as the tests' commands run."""
    return [
        forked.run(
            args,
            env={**os.environ, "COLUMNS": str(columns), forked.EXEC_ENV: way},
            cwd=cwd,
            timeout=120,
            new_session=True,
        )
        for way in ("0", "1")
    ]


def test_a_forked_command_prints_exits_and_reads_paths_as_python_m_fairwin_does(tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    checked, execd = both(["plan", "check", "examples/sim-window.toml"], tmp_path, 100)
    assert (checked.returncode, checked.stdout, checked.stderr) == (execd.returncode, execd.stdout, execd.stderr)
    assert checked.returncode == 0 and checked.stdout.startswith("examples/sim-window.toml: OK"), checked
    narrow, narrow_execd = both(["rules", "list"], tmp_path, 70)
    wide, _ = both(["rules", "list"], tmp_path, 160)
    assert narrow.stdout == narrow_execd.stdout and narrow.stdout != wide.stdout  # the child's own COLUMNS
    table = [line for line in narrow.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) <= 70  # the table drawn to the child's COLUMNS
    missing, missing_execd = both(["plan", "check", "nowhere.toml"], tmp_path, 100)
    assert (missing.returncode, missing.stderr) == (missing_execd.returncode, missing_execd.stderr)
    assert missing.returncode == 2 and len(missing.stderr.splitlines()) == 1, missing.stderr


def test_a_forked_command_past_its_timeout_is_killed() -> None:
    port = free_port()
    argv = ["sim", "--port", str(port), "--model", "forked-timeout"]
    env = {**os.environ, forked.EXEC_ENV: "0"}
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(forked.run, argv, env=env, cwd=None, timeout=6, new_session=True)
        wait_healthy(f"http://127.0.0.1:{port}/health")  # the sim serves, then the timeout kills it
        with pytest.raises(subprocess.TimeoutExpired):
            running.result()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
