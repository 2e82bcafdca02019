"""The remote command line and environment, exactly: what sshd's shell is given is quoted, whole and minimal."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from fairwin.errors import InputError
from fairwin.launch.remote import RemoteServer
from fairwin.launch.spec import make_spec
from fairwin.launch.ssh import parse_env
from fairwin.plan.hosts import Host, resolved
from fairwin.plan.roles import Role


def test_the_remote_command_launches_the_server_detached_with_exactly_its_environment() -> None:
    role = Role.model_validate(
        {
            "argv": ["{python}", "-m", "x", "--name", 'it\'s "quoted"', "--port", "{port}"],
            "base_url": "http://10.0.0.2:{port}",
            "port": 9000,
            "served_model": "m",
            "host": "gpu",
            "env": {"A": "1 2"},
            "cwd": "/srv/run dir",
        }
    )
    hosts = {"gpu": Host(address="10.0.0.2", python="/opt/py/bin/python")}
    spec = make_spec("R", {"R": role}, Path("/plans"), hosts)
    assert spec.argv[0] == "/opt/py/bin/python" and spec.host == "gpu"
    server = RemoteServer(
        spec=spec.for_start("W1", "s2"), host_name="gpu", host=hosts["gpu"], log_path=Path("/dev/null")
    )
    server.expected = {"PATH": "/usr/bin", "A": "1 2"}
    command = server.command()
    run = '"$HOME"/.fairwin/run/fairwin-W1-s2-R-head'
    assert command.startswith(f"rm -rf {run} && mkdir -p {run} && cd '/srv/run dir' && setsid --fork sh -c ")
    assert command.endswith(" < /dev/null > /dev/null 2>&1")  # the SSH channel is not held open by the server
    words = shlex.split(command.split(" && ", 3)[3].removesuffix(" < /dev/null > /dev/null 2>&1"))
    assert words[:4] == ["setsid", "--fork", "sh", "-c"]
    assert words[5:] == [
        "$HOME/.fairwin/run/fairwin-W1-s2-R-head",  # $0: the wrapper keeps its pid, group, exit and log there
        "env",
        "-i",
        "A=1 2",
        "PATH=/usr/bin",
        "/opt/py/bin/python",
        "-m",
        "x",
        "--name",
        'it\'s "quoted"',
        "--port",
        "9000",
    ]


def test_environ_bytes_and_host_paths() -> None:
    assert parse_env(b"A=1\0B=x=y\0\0") == {"A": "1", "B": "x=y"}
    host = resolved(Host(address="h", key_file=Path("keys/id"), known_hosts=Path("kh")), Path("/plans"))
    assert host.key_file == Path("/plans/keys/id") and host.known_hosts == Path("/plans/kh")


class _Done:
    def __init__(self, stdout: str) -> None:
        self.exit_status, self.stdout, self.stderr = 0, stdout, ""


class _Connection:
    """An asyncssh connection's part a session uses: ``run``, ``close``, ``wait_closed``; lost on demand."""

    def __init__(self, lose_first: bool) -> None:
        self.lose_first, self.ran, self.closed = lose_first, 0, False

    async def run(self, command: str, check: bool) -> _Done:
        import asyncssh

        if self.lose_first and self.ran == 0:
            self.ran += 1
            raise asyncssh.ConnectionLost("the host closed it")
        self.ran += 1
        return _Done(f"ran {command}")

    def close(self) -> None:
        self.closed = True

    async def wait_closed(self) -> None:
        return None


def test_a_hosts_read_only_commands_share_one_connection_and_a_lost_one_is_made_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sampler reads nvidia-smi every interval: one login per host, not one per sample; a connection the host
    dropped since the last read is made again once."""
    from fairwin.launch import ssh

    made: list[_Connection] = []

    async def connect(name: str, host: Host) -> _Connection:
        made.append(_Connection(lose_first=len(made) == 0))
        return made[-1]

    monkeypatch.setattr(ssh, "connect", connect)
    host = Host(address="10.0.0.9")
    read = ssh.runner("gpu", host)
    assert read(["nvidia-smi", "-q"]) == "ran nvidia-smi -q"  # the first connection was lost: a second login
    assert [read(["nvidia-smi", "-L"]) for _ in range(5)] == ["ran nvidia-smi -L"] * 5
    assert ssh.runner("gpu", host)(["true"]) == "ran true"  # another runner of the same host: the same connection
    assert len(made) == 2 and made[0].closed and made[1].ran == 7
    ssh.close_sessions()
    assert made[1].closed
    with pytest.raises(InputError, match="its connection was closed as fairwin ended"):
        read(["nvidia-smi", "-L"])  # refused at once, not sent to a loop that no longer runs
