"""What a window ran on: fairwin, Python, the host, and the git commit of the working directory."""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from fairwin._version import __version__


def _git(directory: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=directory, capture_output=True, text=True, timeout=10, check=True)
    return done.stdout.strip()


def git_state(directory: Path) -> dict[str, Any]:
    """The commit and whether the tree is dirty; {} outside a git work tree."""
    try:
        commit = _git(directory, "rev-parse", "HEAD")
        dirty = _git(directory, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"commit": commit, "dirty": bool(dirty)}


def commit_of(environment: dict[str, Any]) -> str | None:
    """The git commit an environment (as :func:`capture` records it) ran at; None outside a work tree."""
    found = (environment.get("git") or {}).get("commit")
    return found if isinstance(found, str) else None


def capture(directory: Path) -> dict[str, Any]:
    return {
        "fairwin": __version__,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "git": git_state(directory),
    }
