"""A real PostgreSQL server on loopback for the archive tests: ``initdb`` into a throwaway directory, started with
``pg_ctl`` on a free port with a password login (scram-sha-256), one per test session; each test gets a database of
its own, dropped after it. As root (as CI runs) the server runs as the ``postgres`` user the package creates."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.components import missing
from tests.ports import free_port

USER = "fairwin"


def server_bin() -> Path | None:
    """The server's programs: Debian keeps them in /usr/lib/postgresql/VERSION/bin, off the PATH."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[4]))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@dataclass(frozen=True)
class Server:
    port: int
    password: str

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}:{self.password}@127.0.0.1:{self.port}/{database}"


def _as_server_user(argv: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: as root, they run as the postgres user."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _chown(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    binaries = server_bin()
    if binaries is None:
        missing("PostgreSQL's server", "initdb and pg_ctl are not on this machine")
    root = Path(tempfile.mkdtemp(prefix="fairwin-pg-"))
    root.chmod(0o755)
    _chown(root)
    password = secrets.token_hex(12)
    (root / "pw").write_text(password + "\n")
    _chown(root / "pw")
    data, port = root / "data", free_port()
    run = {"check": True, "capture_output": True, "text": True, "timeout": 120}
    initdb = [
        str(binaries / "initdb"),
        "-D",
        str(data),
        "-U",
        USER,
        "--pwfile",
        str(root / "pw"),
        "--auth-host=scram-sha-256",
        "--auth-local=trust",
        "-E",
        "UTF8",
    ]
    subprocess.run(_as_server_user(initdb), **run)
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1"
    subprocess.run(
        _as_server_user(
            [str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"]
        ),
        **run,
    )
    try:
        yield Server(port=port, password=password)
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            subprocess.run(
                _as_server_user([str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]), **run
            )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: Server) -> Iterator[str]:
    """A fresh, empty database of this test's own."""
    import psycopg

    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield postgres_server.url(name)
    finally:
        with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
