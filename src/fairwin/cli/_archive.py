"""Handlers for ``fairwin archive``: stats, migrate, import, export and append."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from fairwin.cli import _console
from fairwin.cli._arguments import count, file_to_write, positive, window_directory
from fairwin.errors import InputError, UsageError

if TYPE_CHECKING:
    from fairwin.archive import ArchiveRow
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
    stats.add_argument(
        "--plan", type=Path, help="say, per key, whether this plan's windows count its control starts, and why not"
    )
    stats.add_argument("--plan-mode", help="with --plan: which of its modes (default: its default mode)")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(func=archive_stats)
    migrate = which.add_parser("migrate", help="create or upgrade a PostgreSQL archive's schema")
    migrate.add_argument("--archive", help="the database's postgresql:// URL (default: $FAIRWIN_ARCHIVE_URL)")
    migrate.set_defaults(func=archive_migrate)
    into = which.add_parser("import", help="append every row of a JSONL archive file to the archive")
    into.add_argument(
        "file", help="a JSONL archive file (control-archive.jsonl, or an export); with --map, JSONL or CSV"
    )
    into.add_argument("--archive", help=WHERE)
    into.add_argument(
        "--map",
        type=Path,
        help="MAP.toml: the file is another tool's archive, its rows mapped onto archive rows (docs/archive.md)",
    )
    into.add_argument(
        "--replace", metavar="IMPORT", help="with --map: take out this earlier import's rows in the same write"
    )
    into.set_defaults(func=archive_import)
    listed = which.add_parser("imports", help="every import (--map) whose rows the archive uses, by its id")
    listed.add_argument("--archive", help=WHERE)
    listed.set_defaults(func=archive_imports)
    drop = which.add_parser("drop", help="take an import's rows out of the archive (`archive imports` lists them)")
    drop.add_argument("import_id", metavar="IMPORT", help="the import's id, imp-...")
    drop.add_argument("--archive", help=WHERE)
    drop.set_defaults(func=archive_drop)
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
        _console.stderr.print(f"warning: {problem}", markup=False, soft_wrap=True)
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
    verdicts = _plan_matches(args.plan, args.plan_mode) if args.plan is not None else None
    found = [
        (
            key,
            rows,
            [noise(rows, key.cell, metric) for metric in METRICS],
            verdicts(rows[0]) if verdicts is not None else None,
        )
        for key, rows in groups(chosen).items()
    ]
    if args.json:
        printed = [
            {
                "key": key.describe(),
                "control_starts": len(rows),
                "noise": [n.model_dump(mode="json") for n in spread],
                **({"plan": verdict} if verdict is not None else {}),
            }
            for key, rows, spread, verdict in found
        ]
        _console.stdout.print(json.dumps(printed, indent=2), markup=False)
        return 0
    if not found:
        _console.stdout.print(f"{store.location}: no control starts match", markup=False)
    for table in archive_groups_table(store.location, found):
        _console.stdout.print(table)
    return 0


def _plan_matches(plan: Path, mode: str | None) -> Callable[[ArchiveRow], str]:
    """For a row: whether the plan's windows of ``mode`` (its default mode) count it, and where not, the first key
    it differs on; the plan's own match, production's cap as the plan declares it (``plan show``'s)."""
    from fairwin.plan import load_plan
    from fairwin.plan.schedule import default_mode, resolve_mode
    from fairwin.plan.site import Site
    from fairwin.telemetry.cap import planned_cap
    from fairwin.window.preflight import planned_keys

    loaded = load_plan(plan)
    chosen = mode or default_mode(loaded)
    resolve_mode(loaded, chosen)  # a mode the plan does not have is refused here, in one line
    site = Site.for_mode(loaded, chosen)
    keys = planned_keys(site, chosen, planned_cap(site))

    def verdict(row: ArchiveRow) -> str:
        match = keys.get(row.cell)
        if match is None:
            return f"not counted by {plan} ({chosen}): it has no cell {row.cell}"
        differs = match.mismatch(row)
        return f"counted by {plan} ({chosen})" if differs is None else f"not counted by {plan} ({chosen}): {differs}"

    return verdict


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
        _console.stdout.print(f"applied v{migration.version}: {migration.description}", markup=False)
    _console.stdout.print(
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
        return _import_mapped(source, args.map, args.archive, args.replace)
    if args.replace is not None:
        raise UsageError("--replace takes an import made with --map, and needs --map for the rows that replace it")
    snapshot = open_archive(source).snapshot()
    into = open_archive(_location(args.archive))
    done = import_rows(snapshot, into)
    for problem in snapshot.problems:
        _console.stderr.print(f"warning: {problem}", markup=False, soft_wrap=True)
    _console.stdout.print(
        f"imported {done.added} rows of {done.windows} windows into {into.location}"
        + (f"; {done.already} were there already" if done.already else ""),
        markup=False,
    )
    return 0


def _import_mapped(source: Path, map_file: Path, archive: str | None, replacing: str | None) -> int:
    from fairwin.archive import open_archive
    from fairwin.archive.foreign import load_map, mapped_rows
    from fairwin.archive.transfer import import_mapped

    mapped = mapped_rows(source, load_map(map_file))  # every row mapped before any is written
    for warning in mapped.warnings:
        _console.stderr.print(f"warning: {warning}", markup=False, soft_wrap=True)
    into = open_archive(_location(archive))
    import_id, done = import_mapped(mapped.rows, into, replacing)
    windows = len({row.window_id for row in mapped.rows})
    replaced = f"; replaced import {replacing} ({done.dropped} rows)" if replacing else ""
    skipped = f"; {mapped.skipped} rows not control starts" if mapped.skipped else ""
    already = f"; {done.already} were there already" if done.already else ""
    if not done.added:
        _console.stdout.print(
            f"imported nothing into {into.location}: every control start was there already{replaced}", markup=False
        )
        return 0
    _console.stdout.print(
        f"imported {done.added} control starts of {windows} windows into {into.location} as {import_id} "
        f"(mapped by {map_file}{skipped}){already}{replaced}; `fairwin archive drop {import_id}` takes them out",
        markup=False,
        soft_wrap=True,
    )
    return 0


def archive_imports(args: argparse.Namespace) -> int:
    import datetime

    from fairwin.archive import open_archive
    from fairwin.archive.transfer import imports_in

    store = open_archive(_location(args.archive))
    found = imports_in(store.snapshot()) if store.exists() else []
    if not found:
        _console.stdout.print(
            f"{store.location}: no imports (rows brought in with `archive import --map`)", markup=False
        )
    for item in found:
        first, last = (
            datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%d") for t in (item.first, item.last)
        )
        _console.stdout.print(
            f"{item.import_id}: {item.rows} control starts of {item.windows} windows, cells {', '.join(item.cells)}, "
            f"{first} to {last}",
            markup=False,
            soft_wrap=True,
        )
    return 0


def archive_drop(args: argparse.Namespace) -> int:
    from fairwin.archive import open_archive

    store = open_archive(_location(args.archive))
    if not store.exists():
        raise InputError(f"{store.location}: no archive there")
    done = store.replace_import(args.import_id, [])
    _console.stdout.print(
        f"dropped import {args.import_id}: {done.dropped} control starts taken out of {store.location}", markup=False
    )
    return 0


def archive_export(args: argparse.Namespace) -> int:
    from fairwin.archive import open_archive
    from fairwin.archive.transfer import export_rows

    store = open_archive(_location(args.archive))
    if not store.exists():
        raise InputError(f"{store.location}: no archive there to export")
    count = export_rows(store.snapshot(), args.to)
    _console.stdout.print(f"exported {count} rows of {store.location} to {args.to}", markup=False)
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
    _console.stdout.print(
        f"appended {appended.added} control rows of {window.window_id} to {store.location}"
        + (f"; {appended.already} were there already" if appended.already else ""),
        markup=False,
    )
    return 0
