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
ended. A plan with a team's own hold (``[custody]``) journals ``team hold`` right after
``open`` and ``team release`` after the restore; recovery runs the release when the hold
ended and no release did. Recovery appends its own ``recover`` begin and end.

A recovery drill: with ``FAIRWIN_DRILL_KILL_AT="STEP:EVENT"`` (``"start s2:launched"``)
in its environment, fairwin kills itself with SIGKILL as soon as that row is on disk,
exactly as a kill -9 landing inside the step would; ``fairwin recover`` then has
something real to finish. Teams rehearse recovery on their own hosts with it, and the
tests kill a window inside each step with it, however short the step.

Rows are ``fairwin.journal/1`` (:class:`JournalRow`): a step, an event and its time, and what
the event carries as further fields.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, ValidationError

from fairwin.errors import CorruptRecordError, InputError
from fairwin.files import first_problem, scan_jsonl
from fairwin.formats import JOURNAL, RecordFormat
from fairwin.records import Record, append_records

Event = Literal["begin", "end", "failed", "interrupted", "launching", "launched", "reconnected"]

#: The steps whose names are fixed; a start's step and a look's carry the start they follow (:func:`start_step`,
#: :func:`look_step`), so every step name is one of these or made by those two.
FixedStep = Literal[
    "open",
    "team hold",
    "production down",
    "quiet",
    "quiet after",
    "restore",
    "team release",
    "chain hold",
    "chain end",
    "chain abort",
    "decide",
    "archive",
    "budget",
    "close",
    "recover",
]
#: The team's own hold and release ([custody]), named here for every reader of a journal.
HOLD_STEP: FixedStep = "team hold"
RELEASE_STEP: FixedStep = "team release"
START_PREFIX = "start "
LOOK_PREFIX = "look after "


class JournalRow(Record):
    """``fairwin.journal/1``: one transition; what the event carries (an argv, a pid, a step's result) are
    its further fields (:attr:`details`)."""

    record_format: ClassVar[RecordFormat] = JOURNAL
    model_config = ConfigDict(extra="allow")

    format: Literal["fairwin.journal/1"] = "fairwin.journal/1"
    time: float
    step: str
    event: Event

    @property
    def details(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


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
    append_records(path, [JournalRow(time=time.time(), step=step, event=event, **details)])
    if os.environ.get(DRILL_KILL_AT) == f"{step}:{event}":
        os.kill(os.getpid(), signal.SIGKILL)  # the drill: nothing after this row runs, as after a kill -9


DRILL_KILL_AT = "FAIRWIN_DRILL_KILL_AT"


def read_journal(path: Path) -> tuple[list[JournalRow], list[str]]:
    """Every whole row, and a problem for each that is not one of this fairwin's (torn, corrupt, another format).

    Recovery reads on past problems (a journal torn by a kill is exactly what it is for);
    callers that need the whole story refuse on them.
    """
    if not path.exists():
        return [], []
    rows, problems = scan_jsonl(path)
    kept = []
    for number, row in enumerate(rows, 1):
        if (written := row.get("format")) not in JOURNAL.readable:
            readable = ", ".join(JOURNAL.readable)
            problems.append(f"{path} row {number}: format {written!r}; this fairwin reads {readable}")
            continue
        try:
            kept.append(JournalRow.model_validate(row))
        except ValidationError as exc:
            problems.append(f"{path} row {number}: {first_problem(exc)}")
    return kept, problems


def read_whole(path: Path) -> list[JournalRow]:
    """The journal's rows, refused (one line naming the file) when any is torn, corrupt or of another format."""
    if not path.exists():
        raise InputError(f"{path} does not exist")
    rows, problems = read_journal(path)
    if problems:
        raise CorruptRecordError(problems[0])
    return rows


def happened(events: list[JournalRow], step: str, event: Event) -> bool:
    return any(e.step == step and e.event == event for e in events)


@dataclass(frozen=True)
class Launched:
    """A server the journal says was launched (pid known) or being launched (argv only), and where."""

    pid: int | None
    argv: list[str]
    host: str | None  # a [hosts.NAME]; None: fairwin's own host
    container: str | None = None  # a container's name: stopped through its runtime, never by pid
    group: int | None = None  # its process group (a remote server's wrapper's), where it differs from its pid


def servers(events: list[JournalRow]) -> list[Launched]:
    """Every process launched or being launched, the last record per start and member (a role's head, or each
    of its workers on other hosts)."""
    found: dict[tuple[str, str], Launched] = {}
    for event in events:
        details = event.details
        if event.event in ("launching", "launched") and isinstance(argv := details.get("argv"), list):
            pid = details.get("pid") if isinstance(details.get("pid"), int) else None
            host = details.get("host") if isinstance(details.get("host"), str) else None
            key = (event.step, str(details.get("member", "head")))
            box = details.get("container") if isinstance(details.get("container"), str) else None
            group = details.get("group") if isinstance(details.get("group"), int) else None
            found[key] = Launched(pid, [str(a) for a in argv], host, box, group)
    return list(found.values())


def production_at_open(events: list[JournalRow]) -> str | None:
    """The sha256 of production's declaration as the ``open`` step journaled it at its end; None where the window
    declared no production, or its journal has no such end."""
    for event in events:
        if event.step == "open" and event.event == "end":
            production = event.details.get("production")
            found = production.get("sha256") if isinstance(production, dict) else None
            return found if isinstance(found, str) else None
    return None


def step_times(events: list[JournalRow]) -> dict[str, float]:
    """Seconds from the window's open to the end of each step."""
    opened = next(e.time for e in events if e.step == "open" and e.event == "begin")
    return {e.step: e.time - opened for e in events if e.event == "end"}
