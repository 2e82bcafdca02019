"""Where the control archive lives, and what every backend offers: an idempotent append and one snapshot.

Two backends: the embedded JSONL file (the default, one machine) and PostgreSQL (a team's
shared archive, ``postgresql://...``). Both append a window's rows all or none and skip a
row already there (same window, start and cell), and both read a :class:`Snapshot`: every
row in one canonical order, with a digest that is the same on both for the same rows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

from fairwin.archive.archive_row import ArchiveRow
from fairwin.directory.manifest import ArchiveSnapshot
from fairwin.files import canonical_json, sha256_bytes

#: Names the archive for every command and window, before the plan's ``window.archive``.
ARCHIVE_ENV = "FAIRWIN_ARCHIVE_URL"
DEFAULT_FILE = "control-archive.jsonl"
SCHEMES = ("postgresql://", "postgres://")


@dataclass(frozen=True)
class Appended:
    added: int
    already: int  # rows that were there already (a retried append)


@dataclass(frozen=True)
class Replaced:
    dropped: int  # rows of the import taken out
    added: int
    already: int  # rows that were there already, from another import or a window


@dataclass(frozen=True)
class Snapshot:
    """The archive as one read saw it: rows in canonical order, and a line for each one not used."""

    location: str  # where, with any password removed
    rows: tuple[ArchiveRow, ...]
    problems: tuple[str, ...] = ()
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        lines = "".join(canonical_json(row.model_dump(mode="json")) + "\n" for row in self.rows)
        object.__setattr__(self, "digest", sha256_bytes(lines.encode()))

    @property
    def count(self) -> int:
        return len(self.rows)

    def record(self) -> ArchiveSnapshot:
        """What a window's window.json and context.json keep of the snapshot it decided from."""
        return ArchiveSnapshot(rows=self.count, sha256=self.digest)


def canonical(rows: list[ArchiveRow]) -> tuple[ArchiveRow, ...]:
    """One order for every backend (by time, then identity), so the same rows give the same numbers."""
    return tuple(sorted(rows, key=lambda r: (r.time, *r.identity)))


class ArchiveStore(Protocol):
    @property
    def location(self) -> str: ...

    def append(self, rows: list[ArchiveRow]) -> Appended: ...

    def replace_import(self, dropped: str | None, rows: list[ArchiveRow]) -> Replaced:
        """At once: the rows import ``dropped`` brought taken out (InputError where it brought none), and
        ``rows`` appended as one import; a reader sees the archive before or after, never between."""
        ...

    def snapshot(self) -> Snapshot: ...

    def exists(self) -> bool: ...


def redact(location: str) -> str:
    """A location fit to print or store: a URL's password is replaced by ``***``."""
    if not location.startswith(SCHEMES):
        return location
    parts = urlsplit(location)
    if parts.password is None:
        return location
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def is_database(location: str) -> bool:
    return location.startswith(SCHEMES)


def chosen_location(plan_setting: str | None, base_dir: Path, output_dir: Path) -> str:
    """``FAIRWIN_ARCHIVE_URL``, else the plan's ``window.archive`` (a path relative to the plan, or a URL),
    else ``OUTPUT_DIR/control-archive.jsonl``."""
    if from_env := os.environ.get(ARCHIVE_ENV):
        return from_env
    if plan_setting is None:
        return str(output_dir / DEFAULT_FILE)
    if is_database(plan_setting):
        return plan_setting
    path = Path(plan_setting).expanduser()
    return str(path if path.is_absolute() else (base_dir / path).resolve())
