"""A team's shared archive in PostgreSQL (psycopg 3).

Two tables: a control start x cell (its keys as columns, the whole row as ``jsonb``) and
its repeats, one row each, keyed by (window, start, cell, repeat). A window's rows are
appended in one transaction, all or none, and a row already there is skipped
(``ON CONFLICT DO NOTHING``), so any number of coordinators may append at once and a
retry never duplicates. A snapshot is read in one repeatable-read transaction.

The archive also holds the hardware's locks (``fairwin_hardware_locks``): a window takes
one row per piece of hardware it touches (each host, or the coordinator's own machine),
all or none in one transaction, so two coordinators sharing the archive never hold the
same hardware at once; the rows go at the window's close, or with ``fairwin recover``.

The schema is versioned: :data:`MIGRATIONS` is applied by ``fairwin archive migrate``,
one transaction each, under an advisory lock so two migrators never race. A database
whose schema is behind or ahead of this fairwin's is refused with the command to run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from fairwin.errors import MissingExtraError

try:
    import psycopg
    from psycopg.types.json import Jsonb
except ModuleNotFoundError as exc:  # an extra: the JSONL archive needs nothing
    raise MissingExtraError("postgres", exc.name) from None

from fairwin.archive.archive_row import ArchiveRow
from fairwin.archive.store import Appended, Replaced, Snapshot, canonical, redact
from fairwin.directory.lock_record import LockRecord
from fairwin.errors import ArchiveError, InputError
from fairwin.formats import ARCHIVE


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    sql: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "control starts and their repeats",
        """
        CREATE TABLE fairwin_control_starts (
            window_id text NOT NULL,
            start text NOT NULL,
            cell text NOT NULL,
            time double precision NOT NULL,
            role text NOT NULL,
            mode text NOT NULL,
            production_commit text,
            row jsonb NOT NULL,
            PRIMARY KEY (window_id, start, cell)
        );
        CREATE TABLE fairwin_control_repeats (
            window_id text NOT NULL,
            start text NOT NULL,
            cell text NOT NULL,
            repeat integer NOT NULL,
            metrics jsonb NOT NULL,
            PRIMARY KEY (window_id, start, cell, repeat),
            FOREIGN KEY (window_id, start, cell) REFERENCES fairwin_control_starts ON DELETE CASCADE
        );
        CREATE INDEX fairwin_control_starts_key ON fairwin_control_starts (cell, role, mode, production_commit);
    """,
    ),
    Migration(
        2,
        "the hardware's locks, held across coordinators",
        """
        CREATE TABLE fairwin_hardware_locks (
            hardware text PRIMARY KEY,
            window_id text NOT NULL,
            record jsonb NOT NULL
        );
    """,
    ),
)
SCHEMA_VERSION = MIGRATIONS[-1].version
_VERSIONS = "fairwin_archive_schema"
_LOCK = "SELECT pg_advisory_xact_lock(hashtext('fairwin archive schema'))"


class _Held(Exception):
    """Control flow inside take_hardware: raised in its transaction, it rolls every key taken back."""

    def __init__(self, record: LockRecord | None) -> None:
        self.record = record


class PostgresArchive:
    def __init__(self, url: str) -> None:
        self.url = url

    @property
    def location(self) -> str:
        return redact(self.url)

    @contextmanager
    def _connect(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            connection = psycopg.connect(self.url, connect_timeout=10, autocommit=True)
        except psycopg.Error as exc:
            raise ArchiveError(f"the archive at {self.location} cannot be reached: {self._said(exc)}") from None
        try:
            with connection:
                yield connection
        except psycopg.Error as exc:
            raise ArchiveError(f"the archive at {self.location}: {self._said(exc)}") from None

    def _said(self, exc: psycopg.Error) -> str:
        """The server's first line, never the password (libpq does not echo it; this makes sure)."""
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        secret = psycopg.conninfo.conninfo_to_dict(self.url).get("password") if "@" in self.url else None
        return text.replace(str(secret), "***") if secret else text

    # -- schema ----------------------------------------------------------------------------------

    def schema_version(self, connection: psycopg.Connection[Any]) -> int | None:
        """The applied schema's version; None where fairwin never migrated this database."""
        if connection.execute("SELECT to_regclass(%s)", (_VERSIONS,)).fetchone() == (None,):
            return None
        found = connection.execute(f"SELECT max(version) FROM {_VERSIONS}").fetchone()
        return int(found[0]) if found and found[0] is not None else None

    def migrate(self) -> list[Migration]:
        """Apply every migration this database lacks; what was applied (nothing when it was current)."""
        with self._connect() as connection, connection.transaction():
            connection.execute(_LOCK)
            connection.execute(
                f"CREATE TABLE IF NOT EXISTS {_VERSIONS} (version integer PRIMARY KEY, "
                "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            current = self.schema_version(connection) or 0
            self._refuse_newer(current)
            pending = [m for m in MIGRATIONS if m.version > current]
            for migration in pending:
                connection.execute(migration.sql.encode())
                connection.execute(
                    f"INSERT INTO {_VERSIONS} (version, description) VALUES (%s, %s)",
                    (migration.version, migration.description),
                )
        return pending

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise ArchiveError(
                f"the archive at {self.location} has schema v{version}, newer than this fairwin's "
                f"v{SCHEMA_VERSION}; upgrade fairwin"
            )

    def _check_schema(self, connection: psycopg.Connection[Any]) -> None:
        version = self.schema_version(connection)
        if version is None or version < SCHEMA_VERSION:
            have = "no fairwin schema" if version is None else f"schema v{version}"
            raise ArchiveError(
                f"the archive at {self.location} has {have}, this fairwin needs v{SCHEMA_VERSION}; "
                f"run `fairwin archive migrate --archive URL` (URL from {self.location})"
            )
        self._refuse_newer(version)

    def exists(self) -> bool:
        with self._connect() as connection:
            return self.schema_version(connection) is not None

    # -- the hardware's locks ----------------------------------------------------------------------

    def take_hardware(self, keys: list[str], record: LockRecord) -> LockRecord | None:
        """Every key for the window ``record`` names, or none: None when taken, else the record of a window
        holding one."""
        try:
            with self._connect() as connection, connection.transaction():
                self._check_schema(connection)
                for key in keys:
                    taken = connection.execute(
                        "INSERT INTO fairwin_hardware_locks (hardware, window_id, record) VALUES (%s, %s, %s) "
                        "ON CONFLICT DO NOTHING RETURNING hardware",
                        (key, record.window_id, Jsonb(record.stored())),
                    ).fetchone()
                    if taken is None:  # held: the transaction rolls back every key taken before this one
                        held = connection.execute(
                            "SELECT record FROM fairwin_hardware_locks WHERE hardware = %s", (key,)
                        ).fetchone()
                        if held is None:  # released meanwhile: this transaction cannot take it now
                            raise _Held(None)
                        raise _Held(LockRecord.shared(held[0], self.location))
        except _Held as held:
            return held.record if held.record is not None else self.take_hardware(keys, record)
        return None

    def hardware_holder(self, keys: list[str]) -> LockRecord | None:
        """The record of a window holding any of ``keys``, or None."""
        with self._connect() as connection:
            self._check_schema(connection)
            held = connection.execute(
                "SELECT record FROM fairwin_hardware_locks WHERE hardware = ANY(%s) LIMIT 1", (keys,)
            ).fetchone()
        return LockRecord.shared(held[0], self.location) if held else None

    def release_hardware(self, window_id: str) -> None:
        """Every lock ``window_id`` holds (never another window's)."""
        with self._connect() as connection:
            connection.execute("DELETE FROM fairwin_hardware_locks WHERE window_id = %s", (window_id,))

    # -- rows ------------------------------------------------------------------------------------

    def append(self, rows: list[ArchiveRow]) -> Appended:
        with self._connect() as connection, connection.transaction(), connection.cursor() as cursor:
            self._check_schema(connection)
            added = _insert(cursor, rows)
        return Appended(added=added, already=len(rows) - added)

    def replace_import(self, dropped: str | None, rows: list[ArchiveRow]) -> Replaced:
        """One transaction: the rows of import ``dropped`` deleted (their repeats with them), then ``rows``
        appended; InputError, and nothing changed, where no row came from that import."""
        with self._connect() as connection, connection.transaction(), connection.cursor() as cursor:
            self._check_schema(connection)
            removed = 0
            if dropped is not None:
                cursor.execute("DELETE FROM fairwin_control_starts WHERE row->>'imported' = %s", (dropped,))
                removed = max(cursor.rowcount, 0)
                if not removed:
                    raise InputError(f"{self.location}: no import {dropped} here; `fairwin archive imports` lists them")
            added = _insert(cursor, rows)
        return Replaced(dropped=removed, added=added, already=len(rows) - added)

    def snapshot(self) -> Snapshot:
        with self._connect() as connection:
            connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            connection.read_only = True
            with connection.transaction():
                self._check_schema(connection)
                starts = connection.execute("SELECT window_id, start, cell, row FROM fairwin_control_starts").fetchall()
                repeats = connection.execute(
                    "SELECT window_id, start, cell, repeat, metrics FROM fairwin_control_repeats "
                    "ORDER BY window_id, start, cell, repeat"
                ).fetchall()
        by_start: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for window_id, start, cell, repeat, metrics in repeats:
            by_start.setdefault((window_id, start, cell), []).append({"repeat": repeat, **metrics})
        rows, problems = [], []
        for window_id, start, cell, row in starts:
            whole = {**row, "repeats": by_start.get((window_id, start, cell), [])}
            try:
                rows.append(ArchiveRow.model_validate(whole))
            except ValidationError as exc:
                problems.append(
                    f"{self.location}: window {window_id} {start} {cell} is not a {ARCHIVE.id} row "
                    f"({exc.errors()[0]['msg']}); not used"
                )
        return Snapshot(self.location, canonical(rows), tuple(problems))


def _insert(cursor: psycopg.Cursor[Any], rows: list[ArchiveRow]) -> int:
    """Every row and its repeats, inside the caller's transaction, skipping those there already; how many were
    added."""
    starts = [
        (
            r.window_id,
            r.start,
            r.cell,
            r.time,
            r.role,
            r.mode,
            r.production_commit,
            Jsonb(r.model_dump(mode="json", exclude={"repeats"})),
        )
        for r in rows
    ]
    repeats = [
        (r.window_id, r.start, r.cell, rep.repeat, Jsonb(rep.model_dump(mode="json", exclude={"repeat"})))
        for r in rows
        for rep in r.repeats
    ]
    cursor.executemany(
        "INSERT INTO fairwin_control_starts (window_id, start, cell, time, role, mode, production_commit, row)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
        starts,
    )
    added = max(cursor.rowcount, 0)  # the sum over every row: those the conflict skipped count 0
    cursor.executemany(
        "INSERT INTO fairwin_control_repeats (window_id, start, cell, repeat, metrics)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
        repeats,
    )
    return added
