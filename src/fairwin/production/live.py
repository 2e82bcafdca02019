"""Production as it really runs: each of its processes' environment, command line and speculative config, read
on its own host before the take-down (for a container, what its runtime's ``inspect`` reports).

A plan declares production; a team's production drifts from it (a ``serve.sh`` edited on the host, a container
rebuilt). What a derived role (P: production's policy on the experiment's runtime) is compared with is this
reading, never the plan's words. Values under a secret name, or holding a URL's password, are kept as their
sha256 only: the reading is written into window.json and ``state_dir/live.json`` and compared by digest.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from fairwin.directory.declaration import LiveMember, LiveRecord
from fairwin.directory.start_receipt import SpeculativeSource
from fairwin.errors import FairwinError, InputError, ProductionError
from fairwin.files import sha256_bytes
from fairwin.launch.inspect import parse_inspect
from fairwin.launch.reported import NON_DEFAULT, reported_speculative
from fairwin.launch.runtime_cli import RuntimeCli
from fairwin.launch.shell import shell
from fairwin.launch.speculative import stated_speculative
from fairwin.plan.hosts import Host
from fairwin.plan.production import LiveProcess
from fairwin.plan.site import Site
from fairwin.production.where import LAUNCH_MARK
from fairwin.records import read_record, write_record
from fairwin.redaction import fingerprinted, redact_argv

#: Between a process's environment and its command line in one read (neither holds a NUL-delimited marker).
_MARKER_NAME = "FAIRWIN-CMDLINE"
_MARKER = f"\0{_MARKER_NAME}\0"
_PS = "ps -eo pid=,etimes=,args="


@dataclass(frozen=True)
class LiveProduction:
    """Every process of production read before a take-down, with when; ``from_snapshot`` names the window whose
    stored reading stands in when production was already down (a chain's later windows)."""

    members: tuple[LiveMember, ...]
    read_unix: float
    from_snapshot: str | None = None
    changed: list[str] = field(default_factory=list)  # what differs from the reading before it

    def member(self, name: str) -> LiveMember | None:
        return next((m for m in self.members if m.member == name), None)

    def as_record(self) -> LiveRecord:
        """``fairwin.production-live/1``: kept as ``live.json`` and in window.json's ``production.live``."""
        members = list(self.members)
        digest = sha256_bytes(json.dumps([m.model_dump(mode="json") for m in members], sort_keys=True).encode())
        extra = {"from_snapshot": self.from_snapshot} if self.from_snapshot else {}
        return LiveRecord(
            read_unix=round(self.read_unix, 3), members=members, sha256=digest, changed_since_last=self.changed, **extra
        )

    @classmethod
    def from_record(cls, record: LiveRecord, source: str) -> LiveProduction:
        return cls(tuple(record.members), record.read_unix, from_snapshot=source)


# -- reading on a host ---------------------------------------------------------------------------


def oldest_match(listing: str, pattern: str) -> int | None:
    """The pid of the longest-running process whose command line holds ``pattern`` in ``ps -eo
    pid=,etimes=,args=`` output (the ps, and the shell that ran it, never count)."""
    found: list[tuple[int, int]] = []
    for line in listing.splitlines():
        parts = line.split(None, 2)
        numbers = len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit()
        if numbers and pattern in parts[2] and _PS not in parts[2]:
            found.append((-int(parts[1]), int(parts[0])))
    return min(found)[1] if found else None


def parse_process(raw: str) -> tuple[dict[str, str], list[str]]:
    """``/proc/PID/environ``, the marker, ``/proc/PID/cmdline``: the environment and the command line."""
    environ, _, cmdline = raw.partition(_MARKER)
    env = dict(item.split("=", 1) for item in environ.split("\0") if "=" in item)
    return env, [arg for arg in cmdline.split("\0") if arg]


def _runtime(process: LiveProcess) -> str:
    """The runtime's command, with the variables its CLI needs."""
    return RuntimeCli(process.runtime, dict(process.runtime_env)).command([])


async def _reported_line(
    where: tuple[str | None, Host | None],
    process: LiveProcess | None,
    launched_log: str | None,
    current: int | str | None = None,
) -> str:
    """The last 'non-default args' line production's server logged in its current run, never a line an earlier run
    left: in the log fairwin launched it with (after the last launch's mark), its own log file (only when the file
    was written since the process ``current`` names began: a production that restarted and has not logged yet is
    unread, not read by its last run), or its container's logs since ``current`` (its run's StartedAt); empty
    where there is none."""
    name, host = where
    grep = f"grep -a {shlex.quote(NON_DEFAULT.strip())}"
    if process is not None and process.log is not None:
        log = shlex.quote(process.log)
        if not isinstance(current, int):
            return ""  # no process to date its log by
        # The process's start in seconds since the epoch (/proc/stat's btime + its starttime ticks), and the log's.
        began = (
            f"$(( $(awk '/^btime/{{print $2}}' /proc/stat) + $(cut -d')' -f2 /proc/{current}/stat | "
            "awk '{print $20}') / $(getconf CLK_TCK) ))"
        )
        command = f'[ "$(stat -c %Y {log} 2>/dev/null || echo 0)" -ge {began} ] && {grep} {log} | tail -n 1'
    elif process is not None and process.container is not None:
        since = f" --since {shlex.quote(current)}" if isinstance(current, str) else ""
        command = f"{_runtime(process)} logs{since} {shlex.quote(process.container)} 2>&1 | {grep} | tail -n 1"
    elif launched_log is not None:  # newest first, up to this launch's mark
        mark = shlex.quote(LAUNCH_MARK)
        command = f"tac {shlex.quote(launched_log)} 2>/dev/null | sed '/^'{mark}'$/q' | {grep} | head -n 1"
    else:
        return ""
    code, out = await shell(name, host, command, retry="read")
    return out if code == 0 else ""


async def read_member(
    member: str,
    where: tuple[str | None, Host | None],
    process: LiveProcess | None,
    pid: int | None,
    log: str | None = None,
) -> LiveMember:
    """One process of production on its host: by the pid fairwin launched it as, by a command-line match, or
    as a container; ProductionError naming what was not found. Its speculative config is what its server logged
    (``log``, or the process's own ``log``, or a container's logs), else what its argv states."""
    name, host = where
    on = f" on host {name}" if name else " here"
    if process is not None and process.container is not None:
        command = f"{_runtime(process)} inspect --type container {shlex.quote(process.container)}"
        code, out = await shell(name, host, command, retry="read")
        if code != 0:
            raise ProductionError(
                f"production's {member}: container {process.container}{on} could not be "
                f"inspected ({process.runtime} exited {code}: {out.strip()[-200:]})"
            )
        box = parse_inspect(out, process.container)
        found_by = f"container {process.container} ({process.runtime})"
        reported = await _reported_line(where, process, log, box.started_at)
        return live_member(member, name, found_by, box.env, box.argv, (box.mounts, box.image_id), reported)
    found_by = f"pid {pid} (fairwin launched it)"
    if process is not None and process.match is not None:
        code, out = await shell(name, host, _PS, retry="read")
        pid = oldest_match(out, process.match) if code == 0 else None
        if pid is None:
            raise ProductionError(f"production's {member}: no process{on} has {process.match!r} in its command line")
        found_by = f"match {process.match!r}: pid {pid}"
    if pid is None:
        raise ProductionError(f"production's {member}: it is not running{on}")
    reported = await _reported_line(where, process, log, pid)
    command = f"cat /proc/{pid}/environ && printf '\\0{_MARKER_NAME}\\0' && cat /proc/{pid}/cmdline"
    code, out = await shell(name, host, command, retry="read")
    if code != 0:
        raise ProductionError(f"production's {member}: /proc/{pid}{on} could not be read (is it ours to read?)")
    env, argv = parse_process(out)
    return live_member(member, name, found_by, env, argv, None, reported)


def live_member(
    member: str,
    host: str | None,
    found_by: str,
    env: dict[str, str],
    argv: list[str],
    container: tuple[list[dict[str, str]], str] | None,
    reported_line: str,
) -> LiveMember:
    """What was read of the process (``container``: a container's mounts and image id); its speculative config
    from its logged line, else its argv, else none seen."""
    source: SpeculativeSource = "server log"
    speculative = reported_speculative(reported_line)
    if speculative is None:
        source = "argv"
        try:
            speculative = stated_speculative(argv)
        except FairwinError as exc:
            raise ProductionError(f"production's {member}: {exc}") from None
    if speculative is None:
        source = "unobserved"
    mounts, image = container if container is not None else (None, None)
    return LiveMember(
        member=member,
        host=host,
        found_by=found_by,
        argv=redact_argv(argv),
        env=fingerprinted(env),
        speculative=speculative or {},
        mounts=mounts,
        speculative_source=source,
        image_id=image,
    )


# -- the stored reading --------------------------------------------------------------------------


def stored(state_dir: Path) -> LiveProduction | None:
    """The last reading kept in production's state directory, if any."""
    path = state_dir / "live.json"
    if not path.is_file():
        return None
    try:
        record = read_record(path, LiveRecord)
        return LiveProduction.from_record(record, f"{path} (read {_when(record.read_unix)})")
    except (InputError, KeyError, TypeError, ValueError) as exc:
        raise ProductionError(f"{path}: not a reading of production fairwin can use ({exc}); remove it") from None


def keep(state_dir: Path, live: LiveProduction) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    write_record(state_dir / "live.json", live.as_record())


def changes(before: LiveProduction, now: LiveProduction) -> list[str]:
    """What production runs differently from the reading before: 'head: env K, L', 'worker 1: argv'."""
    found = []
    for member in now.members:
        old = before.member(member.member)
        if old is None:
            found.append(f"{member.member}: new")
            continue
        keys = sorted(k for k in old.env.keys() | member.env.keys() if old.env.get(k) != member.env.get(k))
        parts = [f"env {', '.join(keys)}"] if keys else []
        parts += [
            name
            for name in ("argv", "speculative", "mounts", "image_id")
            if getattr(old, name) != getattr(member, name)
        ]
        if parts:
            found.append(f"{member.member}: {'; '.join(parts)}")
    return found


def _when(unix: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix))


def live_plan(site: Site) -> list[tuple[str, str | None, LiveProcess | None]]:
    """(member, host, how to find it) for each process of production the plan says how to read."""
    settings = site.plan.production
    assert settings is not None
    role = site.plan.roles.get(settings.role) if settings.role is not None else None
    home = role.host if role is not None else settings.host
    live = settings.live
    head = live.head if live is not None else None
    found: list[tuple[str, str | None, LiveProcess | None]] = [
        ("head", head.host if head is not None and head.host is not None else home, head)
    ]
    for number, worker in enumerate(live.workers if live is not None else [], 1):
        found.append((f"worker {number}", worker.host if worker.host is not None else home, worker))
    return found
