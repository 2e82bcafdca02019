"""Handlers for `fairwin chain status|check-prev|abort`: where a chain stands, the gate before its next window,
and ending it by hand."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from fairwin.cli import _console
from fairwin.cli._arguments import plan_group

if TYPE_CHECKING:
    from fairwin.cli._arguments import Commands
    from fairwin.plan.site import Site


def add_parsers(commands: Commands) -> None:
    which = plan_group(
        commands,
        "chain",
        "windows that leave production down between them",
        (
            ("status", status, "where a chain stands: its windows, production, placeholders, the next order"),
            (
                "check-prev",
                check_prev,
                "gate the next window (marker, previous window, placeholders); a refusal aborts the chain",
            ),
            ("abort", abort, "placeholders down, production restored and watched, the marker cleared"),
        ),
    )
    which.choices["check-prev"].add_argument("--chain-production", help="production's new capture, as for run")


def _site(args: argparse.Namespace) -> tuple[Site, Path]:
    """The plan's site (every role: a chain's windows may run any mode) and its output directory."""
    from fairwin.plan import load_plan
    from fairwin.plan.site import Site as Built

    loaded = load_plan(args.plan, args.overrides)
    return Built.of(loaded), loaded.output_dir(args.out)


def status(args: argparse.Namespace) -> int:
    from fairwin.custody.chain_end import describe

    for line in asyncio.run(describe(*_site(args))):
        _console.stdout.print(line, markup=False)
    return 0


def check_prev(args: argparse.Namespace) -> int:
    """Exit 0 when the next window may continue the chain (or none is in progress); a refusal aborts it: exit 4."""
    from fairwin.custody.chain_end import check_previous

    site, out = _site(args)
    capture = Path(args.chain_production) if args.chain_production else None
    _console.stdout.print(asyncio.run(check_previous(site, out, capture, _say)), markup=False)
    return 0


def abort(args: argparse.Namespace) -> int:
    """Exit 0 once production is back and the marker cleared; a restore that fails is exit 6, the marker kept."""
    from fairwin.custody.chain_end import abort_between_windows

    site, out = _site(args)
    aborted = asyncio.run(abort_between_windows(site, out, _say, "aborted by hand (`fairwin chain abort`)"))
    if aborted is None:
        _console.stdout.print("no chain in progress: nothing to abort", markup=False)
        return 0
    restore, stopped = aborted.restore, "; ".join(aborted.placeholders) or "none"
    how = restore.up.how if restore.up is not None else "no record of how"
    _console.stdout.print(
        f"ABORTED {aborted.chain_id} (decision REJECT): placeholders {stopped}; production "
        f"{restore.state} ({how}); the marker cleared",
        markup=False,
    )
    for note in aborted.notes:
        _console.stdout.print(f"note: {note}", markup=False)
    return 0


def _say(line: str) -> None:
    _console.stderr.print(line, markup=False)
