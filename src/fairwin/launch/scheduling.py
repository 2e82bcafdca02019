"""Where and how eagerly a launched server runs: its CPU set and its priority.

On a machine where fairwin's client shares cores with the server it measures, the
server's busy threads can keep the client's event loop off every CPU for a whole
stream (measured on vLLM for CPU: 80 to 170 ms of run-queue wait per 100 ms stream),
and the client then reads the stream in one burst. Two levers fix that, each declared
per role and recorded with every start:

- ``cpus``: the server is started under ``taskset --cpu-list`` (util-linux), so it and
  every process it spawns stay on those CPUs; give the client the others
  (``window.client_cpus``).
- ``nice``: the server is started under ``nice -n`` and, where the kernel groups
  scheduling by session (``sched_autogroup``: each session shares one weight, so a
  per-process nice means nothing against another session), its session's autogroup
  gets the same nice. The server is its session's leader, so this touches nothing else.

Both are plain commands so that the server's own pid, environment and children are
exactly those of the declared argv; ``os.sched_setaffinity`` after the launch would
race with the server spawning its workers.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairwin.errors import LaunchError, PlanError
from fairwin.plan.cpus import parse_cpu_list

AUTOGROUP_SWITCH = Path("/proc/sys/kernel/sched_autogroup_enabled")


@dataclass(frozen=True)
class Scheduling:
    cpus: str | None = None
    nice: int | None = None

    def command_prefix(self, role: str) -> list[str]:
        prefix: list[str] = []
        if self.cpus is not None:
            prefix += [_tool("taskset", role, "cpus"), "--cpu-list", self.cpus]
        if self.nice is not None:
            prefix += [_tool("nice", role, "nice"), "-n", str(self.nice)]
        return prefix

    def apply_to_session(self, leader_pid: int) -> str | None:
        """Give the server's session autogroup the role's nice; what happened, for the start receipt."""
        if self.nice is None:
            return None
        try:
            if AUTOGROUP_SWITCH.read_text().strip() != "1":
                return "autogroup off: the process nice applies"
            Path(f"/proc/{leader_pid}/autogroup").write_text(str(self.nice))
        except OSError as exc:
            return f"autogroup nice not set ({exc.strerror}); the process nice applies within its session"
        return f"autogroup nice {self.nice}"

    def record(self, leader_pid: int | None, autogroup: str | None) -> dict[str, Any]:
        return {
            "cpus": self.cpus,
            "nice": self.nice,
            "autogroup": autogroup,
            "server_cpus": None if leader_pid is None else allowed_cpus(leader_pid),
        }


def check_cpus_exist(key: str, cpus: str | None) -> None:
    """Refuse, before anything starts, a CPU list naming CPUs this process may not use."""
    if cpus is None:
        return
    usable = os.sched_getaffinity(0)
    missing = sorted(parse_cpu_list(cpus) - usable)
    if missing:
        raise PlanError(
            f"{key} = {cpus!r} names CPU(s) {missing} that this machine does not offer; usable: "
            f"{','.join(str(c) for c in sorted(usable))}"
        )


def _tool(name: str, role: str, key: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise LaunchError(f"role {role}: `{key}` needs the {name} command, which is not on PATH; install it")
    return path


def allowed_cpus(pid: int) -> str | None:
    """The CPU list a process may run on, as the kernel reports it."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


class ClientAffinity:
    """Pins the calling thread (the client's event loop) to ``cpus`` for a window, then restores it."""

    def __init__(self, cpus: str | None) -> None:
        self.cpus = cpus
        self.previous: set[int] | None = None

    def __enter__(self) -> ClientAffinity:
        if self.cpus is not None:
            self.previous = os.sched_getaffinity(0)
            try:
                os.sched_setaffinity(0, parse_cpu_list(self.cpus))
            except OSError as exc:
                raise LaunchError(
                    f"window.client_cpus = {self.cpus!r}: cannot pin the client there ({exc.strerror}); "
                    f"this machine's CPUs: {sorted(os.sched_getaffinity(0))}"
                ) from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            os.sched_setaffinity(0, self.previous)
