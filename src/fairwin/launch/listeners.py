"""Who listens on a TCP port of a role's host: the identity of the server a start measures.

A health check proves that *something* answers at a URL, not that it is the server
fairwin launched: a server that died on ``bind`` leaves the port to whoever held it, and
that holder answers the health check and the waves. So every port a process will listen
on is proved free on its host before the launch, and once the process is healthy its
port is proved to be held by it (its process group or session: an engine's API server
may be a child of a wrapper script). Here the sockets are read through psutil; on a
``[hosts.NAME]`` through ``ss -Hltnp`` over SSH, with ``ps`` naming each holder. Where
neither can see the holder (no ``ss`` on the host, a socket whose pid is hidden), the
check does not pass: it says what it could not see.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from urllib.parse import urlsplit

import psutil

from fairwin.errors import LaunchError
from fairwin.launch.shell import shell
from fairwin.launch.spec import LaunchSpec
from fairwin.redaction import redact_argv, scrub

SS_PID = re.compile(r"pid=(\d+)")


@dataclass(frozen=True)
class Listener:
    """A process that listens on the port; ``pid`` None where its host does not tell whose socket it is."""

    pid: int | None
    command: str = ""
    group: int | None = None  # its process group id
    session: int | None = None  # its session id

    def describe(self) -> str:
        if self.pid is None:
            return "a process whose pid its host does not show"
        return f"pid {self.pid} ({self.command[:160] or 'no command line'})"

    def belongs_to(self, leader: int) -> bool:
        """It is ``leader`` itself, or runs in the process group or session fairwin launched ``leader`` as."""
        return self.pid is not None and leader in (self.pid, self.group, self.session)


def listen_ports(spec: LaunchSpec, ready_port: int | None = None) -> list[int]:
    """The ports a process will listen on, on its own host: a head's base URL's port, a worker's ready port."""
    if spec.member != "head":
        return [ready_port] if ready_port is not None else []
    parts = urlsplit(spec.base_url)
    return [parts.port or (443 if parts.scheme == "https" else 80)]


def _shown(argv: list[str]) -> str:
    return scrub(shlex.join(redact_argv(argv)))


def described(held: list[Listener]) -> str | None:
    """Every holder of a port, described for a refusal (None: nobody holds it)."""
    return "; ".join(h.describe() for h in held) if held else None


def held_here(port: int) -> str | None:
    """Who listens on ``port`` on this machine, described (None: nobody)."""
    return described(_here(port))


def _here(port: int) -> list[Listener]:
    """Listeners of ``port`` on this machine, through psutil (root sees every process's sockets)."""
    found: dict[int | None, Listener] = {}
    try:
        sockets = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:
        raise LaunchError(
            f"cannot read this machine's sockets to see who listens on port {port} (psutil was denied); run "
            "fairwin as a user that may read them (root)"
        ) from None
    for sock in sockets:
        if sock.status != psutil.CONN_LISTEN or not sock.laddr or sock.laddr.port != port:
            continue
        found[sock.pid] = _described_here(sock.pid)
    return list(found.values())


def _described_here(pid: int | None) -> Listener:
    if pid is None:
        return Listener(None)
    try:
        process = psutil.Process(pid)
        return Listener(pid, _shown(process.cmdline()), os.getpgid(pid), os.getsid(pid))
    except (psutil.Error, OSError):  # it exited between the two reads: still named, by its pid
        return Listener(pid)


async def _on_host(spec: LaunchSpec, port: int) -> list[Listener]:
    """Listeners of ``port`` on the spec's host, through ``ss`` and ``ps`` over SSH."""
    command = f"command -v ss >/dev/null || exit 127; ss -Hltnp 'sport = :{port}'"
    code, out = await shell(spec.host, spec.remote, command, retry="read")
    if code == 127:
        raise LaunchError(
            f"{spec.label}: cannot see who listens on port {port} on host {spec.host}: `ss` is not installed "
            "there (iproute2); install it, so that fairwin can prove the server it measures is the one it launched"
        )
    if code != 0:
        raise LaunchError(f"{spec.label}: `ss` on host {spec.host} exited {code}; cannot see who listens on {port}")
    lines = [line for line in out.splitlines() if line.strip()]
    pids = sorted({int(p) for line in lines for p in SS_PID.findall(line)})
    found = [Listener(None) for line in lines if not SS_PID.search(line)]
    if pids:
        code, out = await shell(
            spec.host, spec.remote, f"ps -o pid=,pgid=,sid=,args= -p {','.join(map(str, pids))}", retry="read"
        )
        described = {int(f[0]): f for f in (line.split(None, 3) for line in out.splitlines()) if len(f) >= 3}
        for pid in pids:
            fields = described.get(pid)
            if fields is None:
                found.append(Listener(pid))
            else:
                command = _shown(fields[3].split()) if len(fields) > 3 else ""
                found.append(Listener(pid, command, int(fields[1]), int(fields[2])))
    return found


async def listeners(spec: LaunchSpec, port: int) -> list[Listener]:
    """Every process listening on ``port`` on the host ``spec`` runs on."""
    if spec.remote is not None and spec.host is not None:
        return await _on_host(spec, port)
    return _here(port)


def where(spec: LaunchSpec, port: int) -> str:
    return f"port {port} on host {spec.host}" if spec.host is not None else f"port {port} here"


async def check_free(spec: LaunchSpec, port: int) -> None:
    """Nothing listens on ``port`` on the spec's host; else LaunchError naming the holder."""
    holders = described(await listeners(spec, port))
    if holders is not None:
        raise LaunchError(
            f"{spec.label}: {where(spec, port)} is already held by {holders}; stop it, or give the role another "
            "port: a server launched there would die on bind and the holder would be measured instead"
        )


async def check_ours(spec: LaunchSpec, port: int, leader: int | None, exited: int | None) -> None:
    """The process fairwin launched (pid ``leader``, its group or its session) is what listens on ``port``, and
    nothing else does; else LaunchError naming who answers instead."""
    if exited is not None or leader is None:
        raise LaunchError(
            f"{spec.label}: the process fairwin launched exited with code {exited} though its "
            f"{where(spec, port)} answers: another process answered its health check"
        )
    held = await listeners(spec, port)
    others = [h for h in held if not h.belongs_to(leader)]
    if others or not held:
        holders = "; ".join(h.describe() for h in others) or "nothing (no socket listens there)"
        raise LaunchError(
            f"{spec.label}: {where(spec, port)} is held by {holders}, not by the server fairwin launched "
            f"(pid {leader}); its health and its waves would measure another process"
        )
