"""What a window ran on: fairwin, Python, the host, and the git commit of the working directory."""

from __future__ import annotations

import platform
import socket
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from fairwin._version import __version__
from fairwin.commands import runner


def _git(directory: Path, *args: str) -> str | None:
    """git's answer in ``directory``; None where it has none (not a work tree, no git, too slow)."""
    try:
        done = runner().run(["git", *args], cwd=directory, timeout_s=10)
    except (OSError, TimeoutError):
        return None
    return done.out.strip() if done.status == 0 else None


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
    commit = _git(directory, "rev-parse", "HEAD")
    dirty = _git(directory, "status", "--porcelain", "--untracked-files=no") if commit is not None else None
    if commit is None or dirty is None:
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
