"""The real components the suite runs (sshd, podman, PostgreSQL, Chromium, tmux, openssl, the docker CLI and the
two engines): where one is missing, the test that needs it fails, naming it and why. It skips only where the
component cannot exist on this machine (the project's setup installs system packages as root with apt-get) and this
is not CI: a component that failed to install never passes as a skip."""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest


def cannot_install() -> str | None:
    """Why the project's setup cannot install system packages here; None where it can (root, with apt-get)."""
    if os.geteuid() != 0:
        return "not root"
    if shutil.which("apt-get") is None:
        return "no apt-get"
    return None


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


def missing(component: str, why: str, *, installable: bool = True) -> NoReturn:
    """Fail (or, where it cannot exist here, skip) the test that needs ``component``. ``installable``: whether
    this machine's setup would install it (a system package); engines are installed by `make test` itself, and
    fail wherever it installed them (``FAIRWIN_ENGINES_REQUIRED``) or under CI."""
    if installable:
        reason = cannot_install()
        if reason is None or in_ci():
            pytest.fail(f"{component} is missing: {why}; tools/install-test-tools.sh installs it", pytrace=False)
        pytest.skip(f"{component} cannot be installed here ({reason}): {why}")
    if in_ci() or os.environ.get("FAIRWIN_ENGINES_REQUIRED"):
        pytest.fail(f"{component} is missing: {why}", pytrace=False)
    pytest.skip(f"{component} is missing: {why}")
