"""Handlers for ``fairwin archive``: stats, migrate, import, export and append."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from fairwin.cli._arguments import count, file_to_write, positive, window_directory
from fairwin.cli._console import stderr, stdout
from fairwin.errors import InputError, UsageError

if TYPE_CHECKING:
    from fairwin.cli._arguments import Commands
    from fairwin.directory.layout import WindowDir


DEFAULT_ARCHIVE = "windows/control-archive.jsonl"
WHERE = "the archive: a JSONL file or a postgresql:// URL (default: $FAIRWIN_ARCHIVE_URL, else " + DEFAULT_ARCHIVE + ")"


def add_parsers(commands: Commands) -> None:
    archive = commands.add_parser("archive", help="the control archive")
    which = archive.add_subparsers(dest="archive_command", required=True, metavar="SUBCOMMAND")
    stats = which.add_parser("stats", help="each key's day-to-day spread, the noise a window sets beside its bar")
    stats.add_argument("--archive", help=WHERE)
    for key in ("cell", "role", "mode", "production-commit"):
        stats.add_argument(f"--{key}", help=f"only this {key.replace('-', ' ')}")
    stats.add_argument("--max-tokens", type=count, help="only this max_tokens")
    stats.add_argument("--commit", help="only control starts run while this commit was under test")
    stats.add_argument("--clock-cap-mhz", type=positive, help="only control starts that ran at this cap")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(func=archive_stats)
    migrate = which.add_parser("migrate", help="create or upgrade a PostgreSQL archive's schema")
    migrate.add_argument("--archive", help="the database's postgresql:// URL (default: $FAIRWIN_ARCHIVE_URL)")
    migrate.set_defaults(func=archive_migrate)
    into = which.add_parser("import", help="append every row of a JSONL archive file to the archive")
    into.add_argument("file", help="a JSONL archive file (control-archive.jsonl, or an export)")
    into.add_argument("--archive", help=WHERE)
    into.add_argument(
        "--map",
        type=Path,
        help="MAP.toml: the file is another tool's archive, its rows mapped onto archive rows (docs/archive.md)",
    )
    into.set_defaults(func=archive_import)
    out = which.add_parser("export", help="write every row of the archive to a JSONL file")
    file_to_write(out, "the JSONL file to write (atomically)", required=True, old_positional=True)
    out.add_argument("--archive", help=WHERE)
    out.set_defaults(func=archive_export)
    append = which.add_parser("append", help="append a window's control starts (a retry adds nothing twice)")
    append.add_argument("window", type=window_directory, help="the window directory")
    append.add_argument("--archive", help="default: $FAIRWIN_ARCHIVE_URL, else the file the window names")
    append.set_defaults(func=archive_append)


def _location(given: str | None, fallback: str | None = DEFAULT_ARCHIVE) -> str:
    from fairwin.archive import ARCHIVE_ENV

    found = given or os.environ.get(ARCHIVE_ENV) or fallback
    if found is None:
        raise UsageError(f"name the archive with --archive URL or {ARCHIVE_ENV}")
    return found


def archive_stats(args: argparse.Namespace) -> int:
    from fairwin.archive import groups, noise, open_archive, select
    from fairwin.report.tables import archive_groups_table
    from fairwin.rows import METRICS

    store = open_archive(_location(args.archive))
    if not store.exists():
        raise InputError(f"{store.location}: no archive yet; finished windows append to it (or pass --archive)")
    snapshot = store.snapshot()
    for problem in snapshot.problems:
        stderr.print(f"warning: {problem}", markup=False, soft_wrap=True)
    match = {
        key: value
        for key in ("cell", "role", "mode", "production_commit", "max_tokens")
        if (value := getattr(args, key)) is not None
    }
    chosen = [
        row
        for row in select(snapshot.rows, match)
        if (args.commit is None or row.commit == args.commit)
        and (args.clock_cap_mhz is None or row.clock_cap_mhz == args.clock_cap_mhz)
    ]
    found = [(key, rows, [noise(rows, key.cell, metric) for metric in METRICS]) for key, rows in groups(chosen).items()]
    if args.json:
        printed = [
            {"key": key.describe(), "control_starts": len(rows), "noise": [n.model_dump(mode="json") for n in spread]}
            for key, rows, spread in found
        ]
        stdout.print(json.dumps(printed, indent=2), markup=False)
        return 0
    if not found:
        stdout.print(f"{store.location}: no control starts match", markup=False)
    for table in archive_groups_table(store.location, found):
        stdout.print(table)
    return 0


def archive_migrate(args: argparse.Namespace) -> int:
    from fairwin.archive import is_database, open_archive
    from fairwin.archive.postgres import SCHEMA_VERSION, PostgresArchive

    location = _location(args.archive, None)
    if not is_database(location):
        raise UsageError(f"{location} is a file: only a postgresql:// archive has a schema to migrate")
    store = open_archive(location)
    assert isinstance(store, PostgresArchive)
    applied = store.migrate()
    for migration in applied:
        stdout.print(f"applied v{migration.version}: {migration.description}", markup=False)
    stdout.print(
        f"{store.location}: schema v{SCHEMA_VERSION}" + ("" if applied else " (already current)"), markup=False
    )
    return 0


def archive_import(args: argparse.Namespace) -> int:
    from fairwin.archive import open_archive
    from fairwin.archive.transfer import import_rows

    source = Path(args.file)
    if not source.is_file():
        raise InputError(f"{source}: no such archive file")
    if args.map is not None:
        return _import_mapped(source, args.map, args.archive)
    snapshot = open_archive(source).snapshot()
    into = open_archive(_location(args.archive))
    done = import_rows(snapshot, into)
    for problem in snapshot.problems:
        stderr.print(f"warning: {problem}", markup=False, soft_wrap=True)
    stdout.print(
        f"imported {done.added} rows of {done.windows} windows into {into.location}"
        + (f"; {done.already} were there already" if done.already else ""),
        markup=False,
    )
    return 0


def _import_mapped(source: Path, map_file: Path, archive: str | None) -> int:
    from fairwin.archive import open_archive
    from fairwin.archive.foreign import load_map, mapped_rows
    from fairwin.archive.transfer import append_by_window

    rows, skipped = mapped_rows(source, load_map(map_file))  # every row mapped before any is written
    into = open_archive(_location(archive))
    done = append_by_window(rows, into)
    stdout.print(
        f"imported {done.added} control starts of {done.windows} windows into {into.location} (mapped by {map_file}"
        + (f"; {skipped} rows not control starts" if skipped else "")
        + ")"
        + (f"; {done.already} were there already" if done.already else ""),
        markup=False,
    )
    return 0


def archive_export(args: argparse.Namespace) -> int:
    from fairwin.archive import open_archive
    from fairwin.archive.transfer import export_rows

    store = open_archive(_location(args.archive))
    if not store.exists():
        raise InputError(f"{store.location}: no archive there to export")
    count = export_rows(store.snapshot(), args.to)
    stdout.print(f"exported {count} rows of {store.location} to {args.to}", markup=False)
    return 0


def archive_append(args: argparse.Namespace) -> int:
    from fairwin.archive import is_database, open_archive, redact
    from fairwin.archive.window_rows import control_rows
    from fairwin.directory.manifest import WindowManifest
    from fairwin.records import read_record

    window: WindowDir = args.window
    recorded = read_record(window.manifest, WindowManifest).archive or ""
    usable = recorded if recorded and (not is_database(recorded) or redact(recorded) == recorded) else None
    store = open_archive(_location(args.archive, usable))
    appended = store.append(control_rows(window))
    stdout.print(
        f"appended {appended.added} control rows of {window.window_id} to {store.location}"
        + (f"; {appended.already} were there already" if appended.already else ""),
        markup=False,
    )
    return 0
