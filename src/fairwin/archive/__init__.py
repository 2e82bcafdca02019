"""The control archive: every finished window's control starts, kept forever, keyed as the runbook keys them.

One row per control start x cell (:class:`ArchiveRow`, ``fairwin.archive/2``) with every
repeat's pooled metrics and the keys a window must share to take its spread as noise
(:class:`ArchiveKey`). It lives in a JSONL file (the default) or a PostgreSQL database a
team shares (:func:`open_archive`); both append a window's rows all or none, skip rows
already there, and read one :class:`Snapshot` that :func:`select`, :func:`noise` and
:func:`groups` work on.
"""

from __future__ import annotations

from pathlib import Path

from fairwin.archive.archive_row import ArchivedRepeat, ArchiveKey, ArchiveRow
from fairwin.archive.location import open_archive
from fairwin.archive.noise import KEY_FIELDS, groups, noise, select
from fairwin.archive.store import (
    ARCHIVE_ENV,
    Appended,
    ArchiveStore,
    Snapshot,
    chosen_location,
    is_database,
    redact,
)
from fairwin.decision.inputs import ArchiveNoise
from fairwin.errors import InputError

__all__ = [
    "ARCHIVE_ENV",
    "KEY_FIELDS",
    "Appended",
    "ArchiveKey",
    "ArchiveRow",
    "ArchiveStore",
    "ArchivedRepeat",
    "Snapshot",
    "cell_noise",
    "chosen_location",
    "groups",
    "is_database",
    "noise",
    "open_archive",
    "read_archive",
    "redact",
    "select",
]


def read_archive(location: str | Path) -> Snapshot:
    """The archive at a path or URL, read once."""
    return open_archive(location).snapshot()


def cell_noise(location: str | Path, cell: str, metric: str) -> ArchiveNoise:
    """The archive's noise of ``metric`` in ``cell`` over every archived control start, for an audit.

    An archive with no control start measured in repeats for the cell is an :class:`InputError`.
    """
    store = open_archive(location)
    if not store.exists():
        raise InputError(f"{store.location}: no archive there; finished windows append to it")
    snapshot = store.snapshot()
    found = noise(select(snapshot.rows, {"cell": cell}), cell, metric, snapshot.problems)
    if found.repeat_cv_pct is None:
        raise InputError(f"{store.location}: no archived control starts with repeats for cell {cell!r}")
    return found
