"""The embedded archive: one JSONL file, appended under a lock and fsynced, never rewritten.

A window's rows go in one write under the file's lock, after the rows of that window
already there are left out, so a retried append adds nothing. A torn line from a writer
that crashed mid-write stays where it is and is reported by every read; so is a row
that appears twice (written by hand or by an older fairwin), which is used once.

An import is dropped or replaced the same way, by appending: a ``fairwin.archive-drop/1`` line
names the import whose rows are no longer used (and the replacement's rows follow it in the
same write), so nothing already written is ever changed and the file keeps its own history.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from pydantic import ValidationError

from fairwin.archive.archive_row import ArchiveRow, ImportDropped
from fairwin.archive.store import Appended, Replaced, Snapshot, canonical
from fairwin.errors import InputError
from fairwin.files import append_locked, jsonl_bytes, scan_jsonl
from fairwin.formats import ARCHIVE, ARCHIVE_DROP


class JsonlArchive:
    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def location(self) -> str:
        return str(self.path)

    def exists(self) -> bool:
        return self.path.is_file()

    def append(self, rows: list[ArchiveRow]) -> Appended:
        done = self.replace_import(None, rows)
        return Appended(added=done.added, already=done.already)

    def replace_import(self, dropped: str | None, rows: list[ArchiveRow]) -> Replaced:
        if self.path.is_dir():
            raise InputError(f"{self.path} is a directory, not an archive file")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        counted: list[Replaced] = []

        def payload(existing: bytes) -> bytes:
            gone = _dropped_imports(existing)
            taken_out = 0
            if dropped is not None:
                taken_out = _rows_of_import(existing, dropped, gone)
                if not taken_out:
                    raise InputError(f"{self.path}: no import {dropped} here; `fairwin archive imports` lists them")
                gone.add(dropped)
            present = _identities_of(existing, {row.window_id for row in rows}, gone)
            new = [row for row in rows if row.identity not in present]
            counted.append(Replaced(dropped=taken_out, added=len(new), already=len(rows) - len(new)))
            drop = [] if dropped is None else [_drop_line(dropped, taken_out, rows)]
            return jsonl_bytes([*drop, *(row.model_dump(mode="json") for row in new)])

        append_locked(self.path, payload)
        return counted[0]

    def snapshot(self) -> Snapshot:
        if not self.path.exists():
            return Snapshot(self.location, ())
        if self.path.is_dir():
            raise InputError(f"{self.path} is a directory, not an archive file")
        raw, problems = scan_jsonl(self.path)
        gone = {str(item.get("import_id")) for item in raw if item.get("format") in ARCHIVE_DROP.readable}
        rows: dict[tuple[str, str, str], ArchiveRow] = {}
        for number, item in enumerate(raw, 1):
            if item.get("format") in ARCHIVE_DROP.readable or item.get("imported") in gone:
                continue  # a drop line, or a row of an import it dropped
            try:
                row = ArchiveRow.model_validate(item)
            except ValidationError as exc:
                problems.append(
                    f"{self.path}: row {number} is not a {ARCHIVE.id} row ({exc.errors()[0]['msg']}); not used"
                )
                continue
            if row.identity in rows:
                problems.append(
                    f"{self.path}: row {number} repeats window {row.window_id} {row.start} {row.cell}; used once"
                )
                continue
            rows[row.identity] = row
        return Snapshot(self.location, canonical(list(rows.values())), tuple(problems))


def _drop_line(dropped: str, taken_out: int, rows: list[ArchiveRow]) -> dict[str, object]:
    replaced_by = next((row.imported for row in rows if row.imported is not None), None)
    record = ImportDropped(import_id=dropped, time=time.time(), rows=taken_out, replaced_by=replaced_by)
    return record.stored()


def _dropped_imports(existing: bytes) -> set[str]:
    """The imports a drop line in the file took out (only those lines are parsed)."""
    tag = json.dumps(ARCHIVE_DROP.id).encode()
    found: set[str] = set()
    for line in existing.splitlines() if tag in existing else ():
        if tag in line:
            try:
                found.add(ImportDropped.model_validate_json(line).import_id)
            except ValidationError:
                continue  # a torn drop line drops nothing; readers report it
    return found


def _rows_of_import(existing: bytes, import_id: str, gone: set[str]) -> int:
    """How many rows in the file came from ``import_id`` (none once a drop took it out)."""
    if import_id in gone:
        return 0
    needle = json.dumps(import_id).encode()
    return sum(1 for line in existing.splitlines() if needle in line and b'"imported"' in line)


def _identities_of(existing: bytes, windows: set[str], gone: set[str]) -> set[tuple[str, str, str]]:
    """The (window, start, cell) of rows already in the file for these windows (a row of a dropped import is not
    there). Only lines that name one of them are parsed: the whole file is scanned as bytes, which keeps an
    append cheap on a long archive."""
    found: set[tuple[str, str, str]] = set()
    needles = [json.dumps(window).encode() for window in windows]
    if not any(needle in existing for needle in needles):
        return found
    for line in existing.splitlines():
        if not any(needle in line for needle in needles):
            continue
        try:
            item = json.loads(line)
        except (ValueError, RecursionError):
            continue  # a torn line: reported by readers, never counted as present
        if isinstance(item, dict) and item.get("window_id") in windows and item.get("imported") not in gone:
            found.add((item["window_id"], str(item.get("start")), str(item.get("cell"))))
    return found
