"""`fairwin plan check|show`: a plan validated with every gate that needs no host, and its dry plan."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from fairwin.cli._arguments import plan_argument
from fairwin.cli._console import stderr, stdout

if TYPE_CHECKING:
    from fairwin.cli._arguments import Commands
    from fairwin.plan.loading import LoadedPlan


def add_parsers(commands: Commands) -> None:
    plan = commands.add_parser("plan", help="check a plan file or show its dry plan")
    plan_commands = plan.add_subparsers(dest="plan_command", required=True, metavar="SUBCOMMAND")
    check = plan_commands.add_parser("check", help="validate a plan and every file it pins")
    plan_argument(check)
    check.set_defaults(func=plan_check)
    show = plan_commands.add_parser("show", help="print the starts, waves, seeds, prompt ids and estimated duration")
    plan_argument(show)
    show.add_argument("--mode", help="mode to show (default: controlled, or the plan's only mode)")
    show.set_defaults(func=plan_show)


def print_notices(loaded: LoadedPlan) -> None:
    for notice in loaded.notices:
        stderr.print(f"note: {notice}", markup=False)


def plan_check(args: argparse.Namespace) -> int:
    from fairwin.decision import get_rule
    from fairwin.gates.budget import check_budget
    from fairwin.gates.sequence import estimates
    from fairwin.plan import load_plan
    from fairwin.window.preflight import error_rate_check, preflight, read_plan_archive_starts

    loaded = load_plan(args.plan, args.overrides)
    print_notices(loaded)
    modes = loaded.plan.all_modes()
    for mode in modes:
        preflight(loaded, mode)
    # The budget's gate, as `fairwin run` applies it: a plan that cannot fit is not OK.
    for found in estimates(loaded, loaded.output_dir(), read_plan_archive_starts(loaded)):
        check_budget(loaded, found)
    stdout.print(
        f"{args.plan}: OK (sha256 {loaded.sha256}); roles {', '.join(loaded.plan.roles)}; "
        f"modes {', '.join(modes) or '(none)'}; cells {', '.join(loaded.plan.cells)}"
    )
    if not modes:
        stderr.print(
            "warning: no mode can run: declare [modes.NAME] with control and candidate roles, or name the "
            "roles A and B (mode controlled) or P and B (production-policy)",
            markup=False,
        )
    for warning in error_rate_check(loaded, get_rule(loaded.plan.window.rule)):
        stderr.print(f"warning: {warning}", markup=False)
    return 0


def plan_show(args: argparse.Namespace) -> int:
    from fairwin.gates.sequence import estimates
    from fairwin.plan import load_plan
    from fairwin.plan.schedule import default_mode
    from fairwin.report.dryplan import render_dry_plan
    from fairwin.window.preflight import first_look_archive, hold_lines, power_check, preflight, read_plan_archive

    loaded = load_plan(args.plan, args.overrides)
    print_notices(loaded)
    checked = preflight(loaded, args.mode or default_mode(loaded))
    snapshot = read_plan_archive(loaded)
    budgets = estimates(
        loaded, loaded.output_dir(), first_look_archive(loaded, checked.rule, snapshot, checked.mode_name)
    )
    stdout.print(render_dry_plan(loaded, checked.mode_name, checked.mode, checked.rule, budgets), markup=False)
    chosen = next(found for found in budgets if found.mode == checked.mode_name)
    for line in ["", *hold_lines(loaded, checked.rule, checked.mode_name, chosen, snapshot)]:
        stdout.print(line, markup=False)
    warnings = power_check(loaded, checked.rule, checked.mode_name)
    stdout.print("", markup=False)
    if warnings:
        for warning in warnings:
            stdout.print(f"warning: {warning}", markup=False)
    else:
        stdout.print("power: no warning from the control archive's noise", markup=False)
    return 0
