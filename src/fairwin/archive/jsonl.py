"""The embedded archive: one JSONL file, appended under a lock and fsynced, never rewritten.

A window's rows go in one write under the file's lock, after the rows of that window
already there are left out, so a retried append adds nothing. A torn line from a writer
that crashed mid-write stays where it is and is reported by every read; so is a row
that appears twice (written by hand or by an older fairwin), which is used once.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from fairwin.archive.archive_row import ArchiveRow
from fairwin.archive.store import Appended, Snapshot, canonical
from fairwin.errors import InputError
from fairwin.files import append_locked, jsonl_bytes, scan_jsonl
from fairwin.formats import ARCHIVE


class JsonlArchive:
    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def location(self) -> str:
        return str(self.path)

    def exists(self) -> bool:
        return self.path.is_file()

    def append(self, rows: list[ArchiveRow]) -> Appended:
        if self.path.is_dir():
            raise InputError(f"{self.path} is a directory, not an archive file")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        counted: list[int] = []

        def missing(existing: bytes) -> bytes:
            present = _identities_of(existing, {row.window_id for row in rows})
            new = [row for row in rows if row.identity not in present]
            counted.append(len(new))
            return jsonl_bytes(row.model_dump(mode="json") for row in new)

        append_locked(self.path, missing)
        return Appended(added=counted[0], already=len(rows) - counted[0])

    def snapshot(self) -> Snapshot:
        if not self.path.exists():
            return Snapshot(self.location, ())
        if self.path.is_dir():
            raise InputError(f"{self.path} is a directory, not an archive file")
        raw, problems = scan_jsonl(self.path)
        rows: dict[tuple[str, str, str], ArchiveRow] = {}
        for number, item in enumerate(raw, 1):
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


def _identities_of(existing: bytes, windows: set[str]) -> set[tuple[str, str, str]]:
    """The (window, start, cell) of rows already in the file for these windows. Only lines that name one of
    them are parsed: the whole file is scanned as bytes, which keeps an append cheap on a long archive."""
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
        if isinstance(item, dict) and item.get("window_id") in windows:
            found.add((item["window_id"], str(item.get("start")), str(item.get("cell"))))
    return found
