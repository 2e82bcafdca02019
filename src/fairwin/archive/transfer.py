"""Moving rows between archives: ``fairwin archive import`` and ``export``, every field kept.

An import appends window by window (each window's rows all or none, as a window's own
append is), so an import cut short is finished by running it again: rows already there
are skipped. An export writes the whole archive as a JSONL file, atomically, in the
snapshot's canonical order; importing that file elsewhere gives the same snapshot digest.
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fairwin.archive.archive_row import ArchiveRow
from fairwin.archive.store import ArchiveStore, Replaced, Snapshot
from fairwin.errors import InputError
from fairwin.files import write_jsonl_atomic


@dataclass(frozen=True)
class Imported:
    windows: int
    added: int
    already: int


def import_rows(source: Snapshot, into: ArchiveStore) -> Imported:
    """Every row of ``source`` into ``into``; a source in which no line is a row is refused (not an archive)."""
    if not source.rows and source.problems:
        raise InputError(
            f"{source.location}: not one line is an archive row ({len(source.problems)} unreadable); "
            "is it a fairwin archive file (control-archive.jsonl, or an export)?"
        )
    return append_by_window(source.rows, into)


def append_by_window(rows: Sequence[ArchiveRow], into: ArchiveStore) -> Imported:
    """Rows appended window by window (each window's all or none); rows already there are skipped."""
    by_window: dict[str, list[ArchiveRow]] = {}
    for row in rows:
        by_window.setdefault(row.window_id, []).append(row)
    added = already = 0
    for windows_rows in by_window.values():
        appended = into.append(windows_rows)
        added, already = added + appended.added, already + appended.already
    return Imported(windows=len(by_window), added=added, already=already)


def export_rows(source: Snapshot, path: Path) -> int:
    write_jsonl_atomic(path, [row.model_dump(mode="json") for row in source.rows])
    return source.count


def new_import_id() -> str:
    """``imp-20261205T081500Z-3fa9c1``: when, and six hex digits drawn so that two imports never share one."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"imp-{now}-{secrets.token_hex(3)}"


def import_mapped(rows: Sequence[ArchiveRow], into: ArchiveStore, replacing: str | None) -> tuple[str, Replaced]:
    """Another tool's rows appended as one import, with a new id on every row; ``replacing``: an earlier import
    whose rows are taken out in the same write (a corrected map run again). The new id and what changed."""
    import_id = new_import_id()
    stamped = [row.model_copy(update={"imported": import_id}) for row in rows]
    return import_id, into.replace_import(replacing, stamped)


@dataclass(frozen=True)
class ImportSummary:
    """One import's rows as ``fairwin archive imports`` lists them."""

    import_id: str
    rows: int
    windows: int
    cells: list[str]
    first: float
    last: float


def imports_in(source: Snapshot) -> list[ImportSummary]:
    """Every import whose rows the archive still uses, oldest first."""
    by_import: dict[str, list[ArchiveRow]] = {}
    for row in source.rows:
        if row.imported is not None:
            by_import.setdefault(row.imported, []).append(row)
    found = [
        ImportSummary(
            import_id=name,
            rows=len(rows),
            windows=len({r.window_id for r in rows}),
            cells=sorted({r.cell for r in rows}),
            first=min(r.time for r in rows),
            last=max(r.time for r in rows),
        )
        for name, rows in by_import.items()
    ]
    return sorted(found, key=lambda item: item.import_id)
