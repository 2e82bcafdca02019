"""Handlers for decide, rules and archive."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairwin.cli import _console
from fairwin.cli._arguments import count, finite, non_negative, positive, window_directory
from fairwin.errors import ANSWER_IS_NO, UsageError

if TYPE_CHECKING:
    from fairwin.cli._arguments import Commands
    from fairwin.decision import AuditResult, RuleSpec


def add_parsers(commands: Commands) -> None:
    deciding = commands.add_parser("decide", help="recompute a decision from a window directory or a pooled file")
    deciding.add_argument(
        "window", nargs="?", type=window_directory, help="a window directory (uses its stored rows and context)"
    )
    deciding.add_argument("--pooled", help="decide from this pooled JSONL file alone (schema: docs/decision.md)")
    deciding.add_argument("--mode", help="with --pooled: the mode the rows were measured in")
    deciding.add_argument("--clock-cap-mhz", type=positive, help="with --pooled: production's clock cap")
    deciding.add_argument("--reported", action="append", default=[], help="with --pooled: a cell that never decides")
    deciding.add_argument(
        "--rule",
        action="append",
        default=[],
        help="rule id, repeatable for several side by side (default: the window's own; for --pooled, the default rule)",
    )
    deciding.add_argument("--archive", help="with a window: use this archive's noise as it is now")
    deciding.add_argument("--json", action="store_true", help="print the decision document as JSON")
    deciding.set_defaults(func=decide)

    comparing = commands.add_parser("compare", help="verdicts and effects across windows (a chain's, or days)")
    comparing.add_argument(
        "windows", nargs="+", type=window_directory, help="complete window directories, in the order to show them"
    )
    comparing.add_argument("--json", action="store_true", help="print fairwin.comparison/1 as JSON")
    comparing.add_argument("--plot", metavar="FILE.png", help="also draw each cell's effect per window into this PNG")
    comparing.set_defaults(func=compare)

    rules = commands.add_parser("rules", help="registered decision rules and their own error rates")
    rule_commands = rules.add_subparsers(dest="rules_command", required=True, metavar="SUBCOMMAND")
    rule_commands.add_parser("list", help="every registered rule").set_defaults(func=rules_list)
    show = rule_commands.add_parser("show", help="a rule's full definition and sha256")
    show.add_argument("rule")
    show.set_defaults(func=rules_show)
    audit = rule_commands.add_parser("audit", help="false-WIN, false-LOSS and power by seeded Monte Carlo")
    audit.add_argument("rule")
    audit.add_argument("--cv", type=positive, help="relative s.d. of one repeat, in %%")
    audit.add_argument(
        "--launch-cv", type=non_negative, default=0.0, help="relative s.d. of one launch, in %% (default 0)"
    )
    audit.add_argument(
        "--drift", type=finite, default=0.0, help="the level's change from one start to the next, in %% (default 0)"
    )
    audit.add_argument("--noise-from", help="take both from this control archive (with --cell)")
    audit.add_argument("--cell", help="with --noise-from: the cell whose noise to use")
    audit.add_argument("--effect", type=finite, default=0.0, help="a true effect in %% for the power (e.g. 5)")
    audit.add_argument("--repeats", type=count, default=3)
    audit.add_argument("--trials", type=count, default=4000)
    audit.add_argument("--seed", type=int, default=0)
    audit.add_argument("--json", action="store_true")
    audit.set_defaults(func=rules_audit)


def decide(args: argparse.Namespace) -> int:
    from fairwin.decision import get_rule
    from fairwin.decision.document import DecisionsPrinted
    from fairwin.report.console import print_decision
    from fairwin.verdict.pooled_file import decide_pooled
    from fairwin.verdict.stored import decide_window

    rules = [get_rule(rule_id) for rule_id in args.rule]
    notes: list[str] = []
    if args.pooled:
        if args.window:
            raise UsageError("give a WINDOW directory or --pooled FILE, not both")
        if not args.mode:
            raise UsageError("--pooled needs --mode (the mode the rows were measured in)")
        decisions, notes = decide_pooled(
            Path(args.pooled),
            mode=args.mode,
            rules=rules,
            clock_cap_mhz=args.clock_cap_mhz,
            reported=args.reported,
        )
    elif args.window:
        if args.mode or args.clock_cap_mhz is not None or args.reported:
            raise UsageError("--mode, --clock-cap-mhz and --reported are for --pooled; a window records its own")
        recomputed = decide_window(args.window, rules, args.archive)
        decisions, notes = recomputed.decisions, recomputed.notes
    else:
        raise UsageError("give a WINDOW directory, or --pooled FILE --mode MODE")
    for note in notes:
        _console.stderr.print(f"note: {note}", markup=False)
    if args.json:
        # One shape whatever the number of rules: the decisions in the order the rules were named.
        payload = DecisionsPrinted(decisions=decisions, notes=notes)
        _console.stdout.print(json.dumps(payload.stored(), indent=2), markup=False)
        return 0
    for decision in decisions:
        print_decision(_console.stdout, decision)
    return 0


def rules_list(args: argparse.Namespace) -> int:
    from fairwin.decision import RULES
    from fairwin.report.tables import rules_table

    _console.stdout.print(rules_table(list(RULES.values())))
    return 0


def rules_show(args: argparse.Namespace) -> int:
    from fairwin.decision import get_rule

    rule = get_rule(args.rule)
    _console.stdout.print(json.dumps({**rule.model_dump(mode="json"), "sha256": rule.sha256}, indent=2), markup=False)
    return 0


def rules_audit(args: argparse.Namespace) -> int:
    from fairwin.archive import cell_noise
    from fairwin.decision import get_rule
    from fairwin.report.tables import audit_table, beside_table

    rule = get_rule(args.rule)
    if (args.cv is None) == (args.noise_from is None):
        raise UsageError("give the noise as --cv PCT or --noise-from ARCHIVE (with --cell), one of the two")
    repeat_cv, launch_cv, starts = args.cv, args.launch_cv, 0
    if args.noise_from:
        if not args.cell:
            raise UsageError("--noise-from needs --cell: the archive's noise is per cell")
        found = cell_noise(args.noise_from, args.cell, rule.primary)
        for problem in found.problems:
            _console.stderr.print(f"warning: {problem}", markup=False)
        repeat_cv, starts = found.repeat_cv_pct, found.starts
        launch_cv = found.launch_cv_pct if found.launch_cv_pct is not None else launch_cv
    if repeat_cv <= 0 or launch_cv < 0:
        raise UsageError("noise must be positive: --cv > 0 and --launch-cv >= 0")
    common = {
        "repeats": args.repeats,
        "repeat_cv_pct": repeat_cv,
        "launch_cv_pct": launch_cv,
        "trials": args.trials,
        "seed": args.seed,
        "archive_starts": starts,
        "drift_pct": args.drift,
    }
    null, powered, compared = _audited(rule, args.effect, args.trials, common)
    if args.json:
        beside_json = [
            {"no_change": n.model_dump(mode="json"), "effect": e.model_dump(mode="json") if e else None}
            for _, n, e in compared
        ]
        payload = {
            "no_change": null.model_dump(mode="json"),
            "effect": powered.model_dump(mode="json") if powered else None,
            "beside": beside_json,
        }
        _console.stdout.print(json.dumps(payload, indent=2), markup=False)
        return 0
    _console.stdout.print(audit_table(rule, null, powered, args.effect))
    if compared:
        _console.stdout.print(beside_table([(rule, null, powered), *compared], args.effect))
    _console.stdout.print(
        f"noise: repeat cv {repeat_cv:.3f} %, launch cv {launch_cv:.3f} %, drift {args.drift:+g} % a start, "
        f"{args.repeats} repeats, starts {rule.starts_text()}" + (f", archive of {starts} starts" if starts else ""),
        markup=False,
    )
    return 0


def _audited(
    rule: RuleSpec, effect: float | None, trials: int, common: dict[str, Any]
) -> tuple[AuditResult, AuditResult | None, list[tuple[RuleSpec, AuditResult, AuditResult | None]]]:
    """The rule at no change (and at ``effect``), and the fixed rules that ask a sequential rule's question
    beside it at the same noise; a progress bar on a terminal, as thousands of windows take a minute."""
    from rich.progress import Progress

    from fairwin.decision import RULES, audit

    beside = [r for r in RULES.values() if rule.looks and not r.looks and r.primary == rule.primary]
    runs = (2 if effect else 1) * (1 + len(beside))
    columns = Progress.get_default_columns()
    with Progress(*columns, console=_console.stderr, transient=True, disable=not _console.stderr.is_terminal) as bar:
        task = bar.add_task(f"auditing {rule.id}", total=trials * runs)

        def audited(which: RuleSpec, at: float) -> AuditResult:
            bar.update(task, description=f"auditing {which.id} at {at:+g} %")
            return audit(which, effect_pct=at, on_trial=lambda: bar.advance(task), **common)

        null = audited(rule, 0.0)
        powered = audited(rule, effect) if effect else None
        compared = [(r, audited(r, 0.0), audited(r, effect) if effect else None) for r in beside]
    return null, powered, compared


def compare(args: argparse.Namespace) -> int:
    """Exit 0 when every decision cell's verdict is the same in every window, 1 when they differ."""
    from fairwin.report.compare import compare as compare_decisions
    from fairwin.report.compare import comparison_table
    from fairwin.verdict.stored import completed_decision

    if len(args.windows) < 2:
        raise UsageError("compare needs at least two window directories")
    found = compare_decisions([completed_decision(path) for path in args.windows])
    if args.plot:
        from fairwin.files import write_bytes_atomic
        from fairwin.report.plots import across_windows

        ids = [w.window_id for w in found.windows]
        bar = max(w.bar_pct for w in found.windows)
        drawn = across_windows(ids, {c.cell: c.effects for c in found.cells}, bar)
        write_bytes_atomic(Path(args.plot), drawn)
        _console.stderr.print(f"plot: {args.plot}", markup=False)
    if args.json:
        print(found.model_dump_json(indent=2))
    else:
        _console.stdout.print(comparison_table(found))
        _console.stdout.print("the windows agree" if found.agree else "the windows do not agree", markup=False)
    return 0 if found.agree else ANSWER_IS_NO
