"""Handlers for report and export: what people read, and what notebooks load."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from fairwin.cli import _console
from fairwin.cli._arguments import file_to_write, window_directory
from fairwin.errors import UsageError

if TYPE_CHECKING:
    from fairwin.cli._arguments import Commands
    from fairwin.directory.layout import WindowDir


def add_parsers(commands: Commands) -> None:
    report = commands.add_parser("report", help="write a window's report.html (self-contained: figures embedded)")
    report.add_argument("window", type=window_directory, help="a complete window directory")
    file_to_write(report, "write it here (default: WINDOW/report.html)", old="--html")
    report.set_defaults(func=report_html)

    export = commands.add_parser("export", help="pooled rows and decisions of complete windows as CSV or Parquet")
    export.add_argument("windows", nargs="+", type=window_directory, help="complete window directories")
    export.add_argument("--out", required=True, metavar="DIR", help="where pooled.EXT and decisions.EXT go")
    export.add_argument("--format", choices=("csv", "parquet", "both"), default="csv", help="default: csv")
    export.set_defaults(func=export_tables)


def report_html(args: argparse.Namespace) -> int:
    from fairwin.report.html import write_report
    from fairwin.verdict.stored import completed_decision

    window: WindowDir = args.window
    written = write_report(window, completed_decision(window), args.to)
    _console.stdout.print(f"report: {written}", markup=False)
    return 0


def export_tables(args: argparse.Namespace) -> int:
    from fairwin.report.export import FORMATS, export
    from fairwin.verdict.stored import completed_decision

    named: list[WindowDir] = args.windows
    if len({w.path.resolve() for w in named}) < len(named):
        raise UsageError("a window is named twice; name each once")
    windows = [(w.path, completed_decision(w)) for w in named]
    kinds = FORMATS if args.format == "both" else (args.format,)
    for path in export(windows, Path(args.out), kinds):
        _console.stdout.print(f"wrote {path}", markup=False)
    return 0
