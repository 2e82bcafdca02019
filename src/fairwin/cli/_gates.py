"""Handlers for qualify, gate and budget."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from fairwin.cli import _console
from fairwin.cli._arguments import file_to_write

if TYPE_CHECKING:
    from fairwin.cli._arguments import Commands


def add_parsers(commands: Commands) -> None:
    qualify = commands.add_parser("qualify", help="carry a qualification from commit Q to the commit under test")
    qualify_commands = qualify.add_subparsers(dest="qualify_command", required=True, metavar="SUBCOMMAND")
    carry = qualify_commands.add_parser("carry", help="check nothing outside the measurement layer changed")
    carry.add_argument("--plan", required=True, help="the plan whose [qualification] declares the layer")
    carry.add_argument("--receipt", required=True, help="the admission receipt (fairwin.admission/1, QUALIFIED)")
    carry.add_argument("--qualified-commit", required=True)
    carry.add_argument("--head", default="HEAD", help="the commit under test (default HEAD)")
    carry.add_argument("--repo", help="the git work tree (default: the plan's qualification.repo)")
    file_to_write(carry, "where to write the carry receipt", old="--out", required=True)
    carry.set_defaults(func=qualify_carry)

    gate = commands.add_parser("gate", help="correctness gate receipts")
    gate_commands = gate.add_subparsers(dest="gate_command", required=True, metavar="SUBCOMMAND")
    run = gate_commands.add_parser("run", help="run a check command and record a receipt: gate run ... -- CMD ...")
    run.add_argument("--name", required=True)
    file_to_write(run, "the receipt; the full output goes beside it as .log", old="--out", required=True)
    run.add_argument("--artifact", action="append", default=[], help="a file whose sha256 the receipt binds")
    run.add_argument("--repo", default=".", help="the git work tree whose HEAD the receipt records")
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    run.set_defaults(func=gate_run)

    budget = commands.add_parser("budget", help="how good the window estimates have been")
    budget_commands = budget.add_subparsers(dest="budget_command", required=True, metavar="SUBCOMMAND")
    history = budget_commands.add_parser("history", help="estimated against actual measurement time, per window")
    history.add_argument("--dir", default="windows", help="the directory of windows")
    history.set_defaults(func=budget_history)


def qualify_carry(args: argparse.Namespace) -> int:
    from fairwin.gates.qualify import carry
    from fairwin.plan import parse_plan

    plan_path = Path(args.plan)
    _, plan = parse_plan(plan_path)
    repo = Path(args.repo) if args.repo else (plan_path.parent / plan.qualification.repo)
    document = carry(repo, plan.qualification, Path(args.receipt), args.qualified_commit, args.head, args.to)
    _console.stdout.print(
        f"CARRIED: {document.qualified_commit[:12]} -> {document.head[:12]}; {document.files_compared} "
        f"files outside the measurement layer identical, {len(document.units)} units AST-identical; "
        f"receipt {args.to}",
        markup=False,
    )
    return 0


def gate_run(args: argparse.Namespace) -> int:
    from fairwin.gates.correctness import run_gate

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    document = run_gate(args.name, command, args.to, [Path(a) for a in args.artifact], Path(args.repo))
    _console.stdout.print(
        f"gate {args.name} PASS in {document.duration_s:.1f} s at {document.commit[:12]}; receipt {args.to}",
        markup=False,
    )
    return 0


def budget_history(args: argparse.Namespace) -> int:
    from fairwin.gates.calibration import history
    from fairwin.report.tables import budget_table

    directory = Path(args.dir)
    _console.stdout.print(budget_table(directory, history(directory)))
    return 0
