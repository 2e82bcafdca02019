"""Handlers for qualify, gate and budget."""

from __future__ import annotations

import argparse
from pathlib import Path

from fairwin.cli._console import stdout


def qualify_carry(args: argparse.Namespace) -> int:
    from fairwin.gates.qualify import carry
    from fairwin.plan import parse_plan

    plan_path = Path(args.plan)
    _, plan = parse_plan(plan_path)
    repo = Path(args.repo) if args.repo else (plan_path.parent / plan.qualification.repo)
    document = carry(repo, plan.qualification, Path(args.receipt), args.qualified_commit, args.head, Path(args.out))
    stdout.print(
        f"CARRIED: {document['qualified_commit'][:12]} -> {document['head'][:12]}; {document['files_compared']} "
        f"files outside the measurement layer identical, {len(document['units'])} units AST-identical; "
        f"receipt {args.out}",
        markup=False,
    )
    return 0


def gate_run(args: argparse.Namespace) -> int:
    from fairwin.gates.correctness import run_gate

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    document = run_gate(args.name, command, Path(args.out), [Path(a) for a in args.artifact], Path(args.repo))
    stdout.print(
        f"gate {args.name} PASS in {document['duration_s']:.1f} s at {document['commit'][:12]}; receipt {args.out}",
        markup=False,
    )
    return 0


def budget_history(args: argparse.Namespace) -> int:
    from fairwin.gates.calibration import history
    from fairwin.report.tables import budget_table

    directory = Path(args.dir)
    stdout.print(budget_table(directory, history(directory)))
    return 0
