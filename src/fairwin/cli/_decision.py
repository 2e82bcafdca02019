"""Handlers for decide, rules and archive."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fairwin.cli._console import stderr, stdout
from fairwin.errors import UsageError
from fairwin.formats import DECISIONS


def decide(args: argparse.Namespace) -> int:
    from fairwin.decision import get_rule
    from fairwin.report.console import print_decision
    from fairwin.window.stored import decide_pooled, decide_window

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
        recomputed = decide_window(Path(args.window), rules, args.archive)
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
    from fairwin.report.tables import rules_table

    stdout.print(rules_table(list(RULES.values())))
    return 0


def rules_show(args: argparse.Namespace) -> int:
    from fairwin.decision import get_rule

    rule = get_rule(args.rule)
    stdout.print(json.dumps({**rule.model_dump(mode="json"), "sha256": rule.sha256}, indent=2), markup=False)
    return 0


def rules_audit(args: argparse.Namespace) -> int:
    from fairwin.archive import cell_noise
    from fairwin.decision import RULES, audit, get_rule
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
            stderr.print(f"warning: {problem}", markup=False)
        repeat_cv, starts = found.repeat_cv_pct, found.starts
        launch_cv = found.launch_cv_pct if found.launch_cv_pct is not None else launch_cv
    if repeat_cv <= 0 or launch_cv < 0:
        raise UsageError("noise must be positive: --cv > 0 and --launch-cv >= 0")
    common = {"repeats": args.repeats, "repeat_cv_pct": repeat_cv, "launch_cv_pct": launch_cv,
              "trials": args.trials, "seed": args.seed, "archive_starts": starts, "drift_pct": args.drift}  # fmt: skip
    null = audit(rule, effect_pct=0.0, **common)
    powered = audit(rule, effect_pct=args.effect, **common) if args.effect else None
    # A sequential rule's starts vary: the fixed rules that ask its question are audited beside it, same noise.
    beside = [r for r in RULES.values() if rule.looks and not r.looks and r.primary == rule.primary]
    compared = [(r, audit(r, effect_pct=0.0, **common), audit(r, effect_pct=args.effect, **common) if args.effect
                 else None) for r in beside]  # fmt: skip
    if args.json:
        beside_json = [{"no_change": n.model_dump(mode="json"), "effect": e.model_dump(mode="json") if e else None}
                       for _, n, e in compared]  # fmt: skip
        payload = {"no_change": null.model_dump(mode="json"),
                   "effect": powered.model_dump(mode="json") if powered else None, "beside": beside_json}  # fmt: skip
        stdout.print(json.dumps(payload, indent=2), markup=False)
        return 0
    stdout.print(audit_table(rule, null, powered, args.effect))
    if compared:
        stdout.print(beside_table([(rule, null, powered), *compared], args.effect))
    stdout.print(
        f"noise: repeat cv {repeat_cv:.3f} %, launch cv {launch_cv:.3f} %, drift {args.drift:+g} % a start, "
        f"{args.repeats} repeats, starts {rule.starts_text()}" + (f", archive of {starts} starts" if starts else ""),
        markup=False,
    )
    return 0


def compare(args: argparse.Namespace) -> int:
    """Exit 0 when every decision cell's verdict is the same in every window, 1 when they differ."""
    from fairwin.report.compare import compare as compare_decisions
    from fairwin.report.compare import comparison_table
    from fairwin.window.stored import completed_decision

    if len(args.windows) < 2:
        raise UsageError("compare needs at least two window directories")
    found = compare_decisions([completed_decision(path) for path in args.windows])
    if args.plot:
        from fairwin.files import write_bytes_atomic
        from fairwin.report.plots import across_windows

        ids = [w["window_id"] for w in found.windows]
        bar = max(float(w.get("bar_pct", 0.0)) for w in found.windows)
        drawn = across_windows(ids, {c.cell: c.effects for c in found.cells}, bar)
        write_bytes_atomic(Path(args.plot), drawn)
        stderr.print(f"plot: {args.plot}", markup=False)
    if args.json:
        print(found.model_dump_json(indent=2))
    else:
        stdout.print(comparison_table(found))
        stdout.print("the windows agree" if found.agree else "the windows do not agree", markup=False)
    return 0 if found.agree else 1
