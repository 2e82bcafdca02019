"""What a window ran on: fairwin, Python, the host, and the git commit of the working directory."""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from fairwin import __version__


def git_state(directory: Path) -> dict[str, Any]:
    """The commit and whether the tree is dirty; {} outside a git work tree."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"commit": commit, "dirty": bool(dirty)}


def capture(directory: Path) -> dict[str, Any]:
    return {
        "fairwin": __version__,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "git": git_state(directory),
    }
