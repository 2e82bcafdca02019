"""Handlers for decide, rules and archive."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table

from fairwin.cli._console import stderr, stdout
from fairwin.errors import InputError, UsageError
from fairwin.vocabulary import DECISIONS


def decide(args: argparse.Namespace) -> int:
    from fairwin.decision import get_rule
    from fairwin.report.console import print_decision
    from fairwin.window.stored import decide_pooled, decide_window_dir

    rules = [get_rule(rule_id) for rule_id in args.rule]
    notes: list[str] = []
    if args.pooled:
        if args.window:
            raise UsageError("give a WINDOW directory or --pooled FILE, not both")
        if not args.mode:
            raise UsageError("--pooled needs --mode (the mode the rows were measured in)")
        decisions = decide_pooled(
            Path(args.pooled),
            mode=args.mode,
            rules=rules,
            clock_cap_mhz=args.clock_cap_mhz,
            reported=args.reported,
        )
    elif args.window:
        if args.mode or args.clock_cap_mhz is not None or args.reported:
            raise UsageError("--mode, --clock-cap-mhz and --reported are for --pooled; a window records its own")
        recomputed = decide_window_dir(Path(args.window), rules, Path(args.archive) if args.archive else None)
        decisions, notes = recomputed.decisions, recomputed.notes
    else:
        raise UsageError("give a WINDOW directory, or --pooled FILE --mode MODE")
    for note in notes:
        stderr.print(f"note: {note}", markup=False)
    if args.json:
        # One shape whatever the number of rules: the decisions in the order the rules were named.
        payload = {"format": DECISIONS.id, "decisions": [d.model_dump(mode="json") for d in decisions],
                   "notes": notes}  # fmt: skip
        stdout.print(json.dumps(payload, indent=2), markup=False)
        return 0
    for decision in decisions:
        print_decision(stdout, decision)
    return 0


def rules_list(args: argparse.Namespace) -> int:
    from fairwin.decision import RULES

    table = Table(title="registered rules")
    for column in ("id", "kind", "primary", "bar %", "confidence", "order", "sha256"):
        table.add_column(column)
    for rule in RULES.values():
        table.add_row(
            rule.id, rule.kind, rule.primary, f"{rule.bar_pct:g}", f"{rule.confidence:g}", rule.order, rule.sha256[:16]
        )
    stdout.print(table)
    return 0


def rules_show(args: argparse.Namespace) -> int:
    from fairwin.decision import get_rule

    rule = get_rule(args.rule)
    stdout.print(json.dumps({**rule.model_dump(mode="json"), "sha256": rule.sha256}, indent=2), markup=False)
    return 0


def rules_audit(args: argparse.Namespace) -> int:
    from fairwin.archive import noise, read_archive, select
    from fairwin.decision import audit, get_rule

    rule = get_rule(args.rule)
    if (args.cv is None) == (args.noise_from is None):
        raise UsageError("give the noise as --cv PCT or --noise-from ARCHIVE (with --cell), one of the two")
    launch_cv, starts = args.launch_cv, 0
    if args.noise_from:
        if not args.cell:
            raise UsageError("--noise-from needs --cell: the archive's noise is per cell")
        rows, problems = read_archive(Path(args.noise_from))
        for problem in problems:
            stderr.print(f"warning: {problem}", markup=False)
        found = noise(select(rows, cell=args.cell), args.cell, rule.primary)
        if found.repeat_cv_pct is None:
            raise InputError(f"{args.noise_from}: no archived control starts with repeats for cell {args.cell!r}")
        repeat_cv = found.repeat_cv_pct
        launch_cv = found.launch_cv_pct if found.launch_cv_pct is not None else launch_cv
        starts = found.starts
    else:
        repeat_cv = args.cv
    if repeat_cv <= 0 or launch_cv < 0:
        raise UsageError("noise must be positive: --cv > 0 and --launch-cv >= 0")
    common = {"repeats": args.repeats, "repeat_cv_pct": repeat_cv, "launch_cv_pct": launch_cv,
              "trials": args.trials, "seed": args.seed, "archive_starts": starts, "drift_pct": args.drift}  # fmt: skip
    null = audit(rule, effect_pct=0.0, **common)
    powered = audit(rule, effect_pct=args.effect, **common) if args.effect else None
    if args.json:
        payload = {"no_change": null.model_dump(mode="json"),
                   "effect": powered.model_dump(mode="json") if powered else None}  # fmt: skip
        stdout.print(json.dumps(payload, indent=2), markup=False)
        return 0
    table = Table(title=f"{rule.id}: error rates by simulation ({args.trials} trials, seed {args.seed})")
    table.add_column("rate")
    table.add_column("value", justify="right")
    table.add_row("false WIN (no change)", f"{100 * (null.false_win or 0):.2f} %")
    table.add_row("false LOSS (no change)", f"{100 * (null.false_loss or 0):.2f} %")
    for guard, rate in null.guard_failure_rates.items():
        table.add_row(f"  guard {guard} fails (no change)", f"{100 * rate:.2f} %")
    for verdict, rate in null.rates.items():
        table.add_row(f"  {verdict} (no change)", f"{100 * rate:.2f} %")
    if powered is not None:
        table.add_row(f"power: WIN at a true {args.effect:+g} %", f"{100 * (powered.power or 0):.2f} %")
    table.add_row("Monte Carlo error (1 s.e., worst case)", f"{100 * null.mc_error:.2f} points")
    stdout.print(table)
    stdout.print(
        f"noise: repeat cv {repeat_cv:.3f} %, launch cv {launch_cv:.3f} %, drift {args.drift:+g} % a start, "
        f"{args.repeats} repeats, {rule.start_count} starts" + (f", archive of {starts} starts" if starts else ""),
        markup=False,
    )
    return 0


def archive_stats(args: argparse.Namespace) -> int:
    from fairwin.archive import noise, read_archive, select
    from fairwin.vocabulary import METRICS

    path = Path(args.archive)
    if not path.exists():
        raise InputError(f"{path}: no archive yet; finished windows append to it (or pass --archive PATH)")
    rows, problems = read_archive(path)
    for problem in problems:
        stderr.print(f"warning: {problem}", markup=False)
    chosen = select(rows, cell=args.cell, commit=args.commit, clock_cap_mhz=args.clock_cap_mhz,
                    max_tokens=args.max_tokens)  # fmt: skip
    results = [noise(chosen, args.cell, metric, problems) for metric in METRICS]
    if args.json:
        stdout.print(json.dumps([r.model_dump(mode="json") for r in results], indent=2), markup=False)
        return 0
    table = Table(title=f"archive {path}: cell {args.cell}, {len(chosen)} control starts")
    for column in ("metric", "starts", "windows", "day-to-day cv %", "repeat cv %", "range %"):
        table.add_column(column, justify="left" if column == "metric" else "right")

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    for r in results:
        table.add_row(r.metric, str(r.starts), str(r.windows), pct(r.launch_cv_pct), pct(r.repeat_cv_pct),
                      pct(r.range_pct))  # fmt: skip
    stdout.print(table)
    return 0
