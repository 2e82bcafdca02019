"""Real OpenSSH servers on loopback for the remote-host tests: throwaway host and user keys, one sshd per
"host", each on its own port, stopped (with every session it served) after the test."""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.components import missing
from tests.ports import free_port


def _sshd() -> str | None:
    return shutil.which("sshd") or ("/usr/sbin/sshd" if Path("/usr/sbin/sshd").exists() else None)


@dataclass
class Sshd:
    name: str
    port: int
    process: subprocess.Popen[bytes]

    log: Path

    def logins(self) -> int:
        """Connections this server authenticated (its log's "Accepted publickey" lines)."""
        return self.log.read_text(errors="replace").count("Accepted publickey") if self.log.exists() else 0

    def sessions(self) -> list[psutil.Process]:
        """The per-connection sshd processes this server forked (killing one drops that SSH connection)."""
        try:
            return [c for c in psutil.Process(self.process.pid).children() if "sshd" in c.name()]
        except psutil.Error:
            return []


@dataclass
class SshHosts:
    hosts: list[Sshd]
    user: str
    key_file: Path
    known_hosts: Path
    run_dir: Path  # the test's own: servers of tests running side by side on these loopback hosts never meet

    def plan_hosts(self) -> dict[str, dict[str, object]]:
        import sys

        return {
            h.name: {
                "address": "127.0.0.1",
                "port": h.port,
                "user": self.user,
                "key_file": str(self.key_file),
                "known_hosts": str(self.known_hosts),
                "agent": False,
                "python": sys.executable,
                "run_dir": str(self.run_dir),
            }
            for h in self.hosts
        }


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text(errors="replace")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"sshd on port {port} never listened")


@pytest.fixture
def ssh_hosts(tmp_path: Path) -> Iterator[SshHosts]:
    sshd = _sshd()
    if sshd is None:
        missing("OpenSSH's sshd", "sshd is not on the PATH nor in /usr/sbin")
    state = tmp_path / "ssh"
    state.mkdir()
    _keygen(state / "host_key")
    _keygen(state / "user_key")
    (state / "authorized_keys").write_text((state / "user_key.pub").read_text())
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege-separation directory
    host_key = (state / "host_key.pub").read_text().split()[:2]
    servers, known = [], []
    for name in ("h1", "h2"):
        port = free_port()
        config = state / f"{name}.conf"
        config.write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {state / 'host_key'}\nPidFile {state / name}.pid\n"
            f"AuthorizedKeysFile {state / 'authorized_keys'}\nStrictModes no\nUsePAM no\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
            "PubkeyAuthentication yes\nLogLevel INFO\n"
            # A command over SSH runs in the login shell, and bash sources ~/.bashrc when sshd started it at
            # shell level 1: a machine's rc file (pyenv's init here: 0.1 s of CPU and a dozen processes)
            # would run at every command the tests send. Level 2 skips it; what fairwin sends runs as it is.
            # The test's own stand-in GPUs (tests/conftest.py's own_fake_gpus), for every command over SSH too: the
            # stand-in nvidia-smi counts its reads in that directory, and servers launched here are on its GPUs.
            f"SetEnv SHLVL=1 FAKE_GPU_SCOPE={tmp_path}\n"
        )
        log = state / f"{name}.log"  # a file, not a pipe nobody reads: INFO logs every login
        with log.open("wb") as out:
            process = subprocess.Popen([sshd, "-D", "-e", "-f", str(config)], stdout=out, stderr=subprocess.STDOUT)
        _wait_listening(port, process, log)
        servers.append(Sshd(name, port, process, log))
        known.append(f"[127.0.0.1]:{port} {' '.join(host_key)}")
    (state / "known_hosts").write_text("\n".join(known) + "\n")
    try:
        yield SshHosts(servers, getpass.getuser(), state / "user_key", state / "known_hosts", state / "run")
    finally:
        for server in servers:
            for session in server.sessions():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(session.pid, signal.SIGKILL)
            server.process.terminate()
            server.process.wait(10)
