"""`fairwin plan check|show`: a plan validated with every gate that needs no host, and its dry plan."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from fairwin.cli import _console
from fairwin.cli._arguments import plan_argument
from fairwin.errors import PlanError, UsageError

if TYPE_CHECKING:
    from fairwin.cli._arguments import Commands
    from fairwin.plan.loading import LoadedPlan


def add_parsers(commands: Commands) -> None:
    plan = commands.add_parser("plan", help="check a plan file or show its dry plan")
    plan_commands = plan.add_subparsers(dest="plan_command", required=True, metavar="SUBCOMMAND")
    check = plan_commands.add_parser("check", help="validate a plan and every file it pins")
    plan_argument(check)
    lengths = check.add_argument_group("prompt lengths (optional: count every prompt a cell sends)")
    lengths.add_argument("--tokenizer", type=Path, metavar="FILE", help="a local tokenizer.json of the model")
    lengths.add_argument("--tokenize-url", metavar="URL", help="or a running server's /tokenize (its base URL)")
    lengths.add_argument("--model", default="", help="the model name --tokenize-url serves")
    check.set_defaults(func=plan_check)
    show = plan_commands.add_parser("show", help="print the starts, waves, seeds, prompt ids and estimated duration")
    plan_argument(show)
    show.add_argument("--mode", help="mode to show (default: controlled, or the plan's only mode)")
    show.set_defaults(func=plan_show)


def print_notices(loaded: LoadedPlan) -> None:
    for notice in loaded.notices:
        _console.stderr.print(f"note: {notice}", markup=False)


def plan_check(args: argparse.Namespace) -> int:
    from fairwin.decision import get_rule
    from fairwin.plan import load_plan
    from fairwin.plan.site import Site
    from fairwin.window.admission import check_plan
    from fairwin.window.preflight import error_rate_check

    loaded = load_plan(args.plan, args.overrides)
    print_notices(loaded)
    modes = loaded.plan.all_modes()
    for mode in modes:  # the plan's part of a window's admission, as `fairwin run` applies it, for every mode
        check_plan(loaded, mode)
    # Counted before OK is printed: a server that does not answer, or a prompt too short, is not OK.
    lengths = _check_prompt_lengths(loaded, args) if args.tokenizer is not None or args.tokenize_url else None
    _console.stdout.print(
        f"{args.plan}: OK (sha256 {loaded.sha256}); roles {', '.join(loaded.plan.roles)}; "
        f"modes {', '.join(modes) or '(none)'}; cells {', '.join(loaded.plan.cells)}"
    )
    if not modes:
        _console.stderr.print(
            "warning: no mode can run: declare [modes.NAME] with control and candidate roles, or name the "
            "roles A and B (mode controlled) or P and B (production-policy)",
            markup=False,
        )
    for warning in error_rate_check(Site.of(loaded), get_rule(loaded.plan.window.rule), loaded.output_dir()):
        _console.stderr.print(f"warning: {warning}", markup=False)
    if lengths is not None:
        _console.stdout.print(lengths, markup=False)
    return 0


def _check_prompt_lengths(loaded: LoadedPlan, args: argparse.Namespace) -> str:
    """Every prompt counted by the tokenizer or the server; the line to print under OK, else a refusal."""
    from fairwin.client.prompt_lengths import check_prompt_lengths

    if args.tokenizer is not None and args.tokenize_url:
        raise UsageError("give --tokenizer or --tokenize-url, not both")
    counting = check_prompt_lengths(loaded, tokenizer=args.tokenizer, tokenize_url=args.tokenize_url, model=args.model)
    found = asyncio.run(counting)
    for line in found.short:
        _console.stderr.print(line, markup=False)
    if found.short:
        raise PlanError(
            f"{args.plan}: {len(found.short)} of {found.counted} prompts are too short for their cell (listed "
            "above); rebuild those families from longer text (`fairwin prompts --min-chars N`) or lower prompt_tokens"
        )
    shortest = ", ".join(f"{cell} {tokens}" for cell, tokens in found.shortest.items())
    return f"prompts: all {found.counted} long enough (shortest, in tokens: {shortest})"


def plan_show(args: argparse.Namespace) -> int:
    from fairwin.gates.sequence import estimates
    from fairwin.plan import load_plan
    from fairwin.plan.schedule import default_mode
    from fairwin.plan.site import Site
    from fairwin.report.dryplan import render_dry_plan
    from fairwin.telemetry.cap import planned_cap
    from fairwin.window.preflight import first_look_archive, hold_lines, power_check, preflight, read_plan_archive

    loaded = load_plan(args.plan, args.overrides)
    print_notices(loaded)
    checked = preflight(loaded, args.mode or default_mode(loaded))
    site, out = Site.for_mode(loaded, checked.mode_name), loaded.output_dir()
    snapshot = read_plan_archive(site, out)
    budgets = estimates(
        loaded, out, first_look_archive(site, checked.rule, snapshot, checked.mode_name, planned_cap(site))
    )
    _console.stdout.print(render_dry_plan(loaded, checked.mode_name, checked.mode, checked.rule, budgets), markup=False)
    chosen = next(found for found in budgets if found.mode == checked.mode_name)
    for line in ["", *hold_lines(site, checked.rule, checked.mode_name, chosen, snapshot)]:
        _console.stdout.print(line, markup=False)
    warnings = power_check(site, checked.rule, checked.mode_name, out)
    _console.stdout.print("", markup=False)
    if warnings:
        for warning in warnings:
            _console.stdout.print(f"warning: {warning}", markup=False)
    else:
        _console.stdout.print("power: no warning from the control archive's noise", markup=False)
    return 0
