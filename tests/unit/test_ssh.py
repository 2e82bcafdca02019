"""The remote command line and environment, exactly: what sshd's shell is given is quoted, whole and minimal."""

from __future__ import annotations

import shlex
from pathlib import Path

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
