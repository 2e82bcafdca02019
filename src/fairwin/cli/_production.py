"""Handlers for `fairwin production up|down|status|snapshot`: what an operator runs by hand, each proved."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from fairwin.cli import _console
from fairwin.cli._arguments import file_to_write, plan_group
from fairwin.errors import ANSWER_IS_NO

if TYPE_CHECKING:
    from fairwin.cli._arguments import Commands
    from fairwin.production.control import Production


def add_parsers(commands: Commands) -> None:
    which = plan_group(
        commands,
        "production",
        "bring production up, take it down, or say which it is",
        (
            ("up", up, "bring production up and prove it healthy (with --watch, watch it too)"),
            ("down", down, "take production down and prove it: its port refuses, must_not_run absent"),
            ("status", status, "print UP (exit 0) or DOWN (exit 7)"),
            ("snapshot", snapshot, "write production's declaration and its sha256 (for --chain-production)"),
        ),
    )
    which.choices["up"].add_argument("--watch", action="store_true", help="then watch it as a restore does")
    file_to_write(which.choices["snapshot"], "the file (fairwin.production-snapshot/1)", required=True)


def _production(args: argparse.Namespace) -> Production:
    from fairwin.plan import load_plan
    from fairwin.plan.site import Site
    from fairwin.production.control import Production

    loaded = load_plan(args.plan, args.overrides)
    return Production(Site.of(loaded), loaded.output_dir(args.out))


def up(args: argparse.Namespace) -> int:
    """Exit 0 when production is up (and, with --watch, the watch held); a failed watch is exit 6."""
    import aiohttp

    from fairwin.production.watch import WatchResult, watch
    from fairwin.transport import client_session

    production = _production(args)

    async def bring_up() -> tuple[str, WatchResult | None]:
        async with client_session(aiohttp.ClientTimeout(total=None), production.headers) as session:
            proved = await production.bring_up(session)
            watched = await watch(production, session) if args.watch else None
        return f"UP: {proved.how}; {proved.proof} ({proved.seconds:.1f} s)", watched

    line, watched = asyncio.run(bring_up())
    _console.stdout.print(line, markup=False)
    if watched is None:
        return 0
    _console.stdout.print(watched.summary(), markup=False)
    return 0 if watched.ok else 6


def down(args: argparse.Namespace) -> int:
    proved = asyncio.run(_production(args).take_down())
    _console.stdout.print(f"DOWN: {proved.how}; {proved.proof} ({proved.seconds:.1f} s)", markup=False)
    return 0


def status(args: argparse.Namespace) -> int:
    from fairwin.transport import client_session

    production = _production(args)

    async def healthy() -> bool:
        import aiohttp

        async with client_session(aiohttp.ClientTimeout(total=5.0), production.headers) as session:
            return await production.healthy(session)

    if asyncio.run(healthy()):
        _console.stdout.print(f"UP: {production.health_url} answers 200", markup=False)
        return 0
    problems = asyncio.run(production.down_problems())
    detail = "; ".join(problems) if problems else f"{production.base_url} refuses connections"
    _console.stdout.print(f"DOWN: {production.health_url} does not answer 200 ({detail})", markup=False)
    return ANSWER_IS_NO


def snapshot(args: argparse.Namespace) -> int:
    """Production's declaration as the plan says it now, with its sha256, written atomically."""
    from fairwin.production.state_records import SnapshotRecord
    from fairwin.records import write_record

    captured = _production(args).snapshot()
    write_record(args.to, SnapshotRecord.model_validate(captured.declared() | {"sha256": captured.sha256}))
    _console.stdout.print(f"production snapshot {captured.sha256} written to {args.to}", markup=False)
    return 0
