"""What a window ran on: fairwin, Python, the host, and the git commit of the working directory."""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from fairwin._version import __version__


def _git(directory: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=directory, capture_output=True, text=True, timeout=10, check=True)
    return done.stdout.strip()


class GitState(BaseModel):
    """The working directory's commit and whether its tracked files differ from it; empty outside a work tree."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    commit: str | None = None
    dirty: bool | None = None


class Environment(BaseModel):
    """What a window ran on, as window.json keeps it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fairwin: str
    python: str
    implementation: str
    platform: str
    host: str
    git: GitState = GitState()

    @property
    def commit(self) -> str | None:
        """The git commit the window ran at; None outside a work tree."""
        return self.git.commit


def git_state(directory: Path) -> GitState:
    """The commit and whether the tree is dirty; empty outside a git work tree."""
    try:
        commit = _git(directory, "rev-parse", "HEAD")
        dirty = _git(directory, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return GitState()
    return GitState(commit=commit, dirty=bool(dirty))


def capture(directory: Path) -> Environment:
    return Environment(
        fairwin=__version__,
        python=sys.version.split()[0],
        implementation=platform.python_implementation(),
        platform=platform.platform(),
        host=socket.gethostname(),
        git=git_state(directory),
    )
