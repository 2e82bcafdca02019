"""The window's journal: its state machine, one fsynced line per transition, written before it is acted on.

A window moves through its steps in order: ``open`` (gates passed, production's
snapshot recorded) → ``production down`` (proved) → ``quiet`` (proved) → ``start s1``
… ``start sN`` → ``quiet after`` → ``restore`` (production up, then watched) →
``decide`` → ``archive`` → ``budget`` → ``close`` (the final state). Each step's
``begin`` is on disk before the step acts, and its ``end``, ``failed`` or
``interrupted`` after; within a start, ``launching`` (the argv) is written before each
process is launched and ``launched`` (its pid, the leader of its own process group)
right after; a role that spans hosts journals each worker's with its ``member``.
That is what undoes a window whose fairwin died: ``fairwin recover``
stops every server launched or being launched, and gives production back (from the
snapshot recorded at ``open``) when ``production down`` began and no ``restore``
ended. Recovery appends its own ``recover`` begin and end.

A recovery drill: with ``FAIRWIN_DRILL_KILL_AT="STEP:EVENT"`` (``"start s2:launched"``)
in its environment, fairwin kills itself with SIGKILL as soon as that row is on disk,
exactly as a kill -9 landing inside the step would; ``fairwin recover`` then has
something real to finish. Teams rehearse recovery on their own hosts with it, and the
tests kill a window inside each step with it, however short the step.

Rows are ``fairwin.journal/1``; journals written before the format existed have rows
without ``format`` and read the same.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from fairwin.errors import CorruptRecordError, InputError
from fairwin.files import append_jsonl, scan_jsonl
from fairwin.formats import JOURNAL

Event = Literal["begin", "end", "failed", "interrupted", "launching", "launched"]

#: The steps whose names are fixed; a start's step and a look's carry the start they follow (:func:`start_step`,
#: :func:`look_step`), so every step name is one of these or made by those two.
FixedStep = Literal[
    "open",
    "production down",
    "quiet",
    "quiet after",
    "restore",
    "chain hold",
    "chain end",
    "chain abort",
    "decide",
    "archive",
    "budget",
    "close",
    "recover",
]
START_PREFIX = "start "
LOOK_PREFIX = "look after "


def start_step(start: str) -> str:
    """The step that runs a start: ``start s3``."""
    return START_PREFIX + start


def look_step(start: str) -> str:
    """A sequential rule's look after a start: ``look after s3``."""
    return LOOK_PREFIX + start


def started(step: str) -> str | None:
    """The start a step ran (``s3`` for ``start s3``), or None for any other step."""
    return step.removeprefix(START_PREFIX) if step.startswith(START_PREFIX) else None


def record(path: Path, step: str, event: Event, **details: Any) -> None:
    """One transition, appended whole and fsynced before this returns (so before it is acted on)."""
    append_jsonl(path, [{"format": JOURNAL.id, "time": time.time(), "step": step, "event": event, **details}])
    if os.environ.get(DRILL_KILL_AT) == f"{step}:{event}":
        os.kill(os.getpid(), signal.SIGKILL)  # the drill: nothing after this row runs, as after a kill -9


DRILL_KILL_AT = "FAIRWIN_DRILL_KILL_AT"


def read_journal(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every whole row, and a problem for each that is not one of this fairwin's (torn, corrupt, another format).

    Recovery reads on past problems (a journal torn by a kill is exactly what it is for);
    callers that need the whole story refuse on them.
    """
    if not path.exists():
        return [], []
    rows, problems = scan_jsonl(path)
    kept = []
    for number, row in enumerate(rows, 1):
        written = row.get("format", JOURNAL.id)  # rows before fairwin.journal/1 had no format
        if written not in JOURNAL.readable:
            readable = ", ".join(JOURNAL.readable)
            problems.append(f"{path} row {number}: format {written!r}; this fairwin reads {readable}")
        elif not isinstance(row.get("step"), str) or not isinstance(row.get("time"), int | float):
            problems.append(f"{path} row {number}: no step or time")
        else:
            kept.append(row)
    return kept, problems


def read_whole(path: Path) -> list[dict[str, Any]]:
    """The journal's rows, refused (one line naming the file) when any is torn, corrupt or of another format."""
    if not path.exists():
        raise InputError(f"{path} does not exist")
    rows, problems = read_journal(path)
    if problems:
        raise CorruptRecordError(problems[0])
    return rows


def happened(events: list[dict[str, Any]], step: str, event: Event) -> bool:
    return any(e.get("step") == step and e.get("event") == event for e in events)


@dataclass(frozen=True)
class Launched:
    """A server the journal says was launched (pid known) or being launched (argv only), and where."""

    pid: int | None
    argv: list[str]
    host: str | None  # a [hosts.NAME]; None: fairwin's own host


def servers(events: list[dict[str, Any]]) -> list[Launched]:
    """Every process launched or being launched, the last record per start and member (a role's head, or each
    of its workers on other hosts)."""
    found: dict[tuple[str, str], Launched] = {}
    for event in events:
        if event.get("event") in ("launching", "launched") and isinstance(event.get("argv"), list):
            pid = event.get("pid") if isinstance(event.get("pid"), int) else None
            host = event.get("host") if isinstance(event.get("host"), str) else None
            key = (str(event.get("step")), str(event.get("member", "head")))
            found[key] = Launched(pid, [str(a) for a in event["argv"]], host)
    return list(found.values())


def opened_with(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What the ``open`` step recorded at its end: the plan's sha256 and production's snapshot."""
    for event in events:
        if event.get("step") == "open" and event.get("event") == "end":
            return event
    return {}


def step_times(events: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds from the window's open to the end of each step."""
    opened = next(e["time"] for e in events if e["step"] == "open" and e["event"] == "begin")
    return {e["step"]: e["time"] - opened for e in events if e["event"] == "end"}
