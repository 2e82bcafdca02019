"""A real container engine for the container tests: rootful podman with runc, its storage, state and events in a
throwaway directory per test session (../shared/notes/containers-here.md), an image made without any registry (an
empty tar imported, the host's Python and this checkout bind-mounted read-only), and, for the docker CLI, podman's
Docker-compatible socket."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.components import missing

IMAGE = "localhost/fairwin-scratch:test"
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Engine:
    """A throwaway podman: the variables its CLI needs, and the mounts a container needs to run the sim."""

    root: Path
    env: dict[str, str]
    docker_host: str | None = None

    def podman(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["podman", *args], env={**os.environ, **self.env}, capture_output=True, text=True, check=check, timeout=60
        )

    def names(self, label: str = "fairwin.window", *, every: bool = True) -> list[str]:
        """Containers carrying the label (stopped ones too, unless ``every`` is off)."""
        args = ["ps", *(["-a"] if every else []), "--filter", f"label={label}", "--format", "{{.Names}}"]
        return sorted(line for line in self.podman(*args).stdout.split() if line)

    def sim_container(self, runtime: str = "podman") -> dict[str, object]:
        """A role's [container] table running `fairwin sim` from this checkout."""
        env = dict(self.env) if runtime == "podman" else {"DOCKER_HOST": str(self.docker_host)}
        return {"runtime": runtime, "runtime_env": env, "image": IMAGE, "mounts": sim_mounts()}


def sim_mounts() -> list[str]:
    """What the sim needs from the host, read-only: the system, the interpreter, the venv and this checkout."""
    paths = ["/usr", "/lib", "/bin", "/etc/ssl", sys.base_prefix, sys.prefix, str(REPO)]
    paths += ["/lib64"] if Path("/lib64").exists() else []
    kept: list[str] = []
    for path in sorted(set(paths), key=len):  # a path under one already mounted comes with it
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return [f"{p}:{p}:ro" for p in kept]


def _write_config(root: Path) -> dict[str, str]:
    (root / "storage.conf").write_text(
        f'[storage]\ndriver = "vfs"\ngraphroot = "{root}/root"\nrunroot = "{root}/runroot"\n'
    )
    (root / "containers.conf").write_text(
        "[containers]\n"
        'netns = "host"\nlog_driver = "k8s-file"\ndefault_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]\n'
        "[engine]\n"
        f'cgroup_manager = "cgroupfs"\nevents_logger = "file"\nevents_logfile_path = "{root}/events.log"\n'
        f'runtime = "runc"\ntmp_dir = "{root}/tmp"\nstatic_dir = "{root}/root/libpod"\n'
        f'volume_path = "{root}/root/volumes"\n'
        f'[engine.runtimes]\nrunc = ["{root}/runc"]\n'
    )
    runc = root / "runc"
    runc.write_text(f'#!/bin/sh\nexec /usr/sbin/runc --root "{root}/runc-state" "$@"\n')
    runc.chmod(0o755)
    return {"CONTAINERS_CONF": str(root / "containers.conf"), "CONTAINERS_STORAGE_CONF": str(root / "storage.conf")}


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "the container tests run rootful podman, which needs root"
    for tool, where in (("podman", "podman"), ("runc", "/usr/sbin/runc")):
        if shutil.which(tool) is None and not Path(where).exists():
            return f"{tool} is not installed (tools/install-test-tools.sh installs it with apt-get)"
    return None


@pytest.fixture(scope="session")
def container_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    why = _missing()
    if why is not None:
        missing("rootful podman with runc", why)
    root = tmp_path_factory.mktemp("podman")
    engine = Engine(root, _write_config(root))
    empty = root / "empty.tar"
    with tarfile.open(empty, "w"):
        pass
    engine.podman("import", str(empty), IMAGE)
    try:
        yield engine
    finally:
        engine.podman("rm", "-a", "-f", check=False)
        subprocess.run(["/usr/sbin/runc", "--root", str(root / "runc-state"), "list"], capture_output=True, check=False)
        shutil.rmtree(root / "runc-state", ignore_errors=True)


@pytest.fixture(scope="session")
def docker_engine(container_engine: Engine) -> Iterator[Engine]:
    """The same engine driven by the docker CLI, through podman's Docker-compatible socket."""
    if shutil.which("docker") is None:
        missing("the docker CLI", "docker is not on the PATH")
    socket = container_engine.root / "podman.sock"
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{socket}"],
        env={**os.environ, **container_engine.env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 20
    while not socket.exists():
        assert service.poll() is None and time.monotonic() < deadline, "podman system service did not start"
        time.sleep(0.1)
    container_engine.docker_host = f"unix://{socket}"
    try:
        yield container_engine
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(service.pid, signal.SIGTERM)
        service.wait(10)
