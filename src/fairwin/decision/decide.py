"""From decision rows to a decision document. Pure: no I/O, no clock, no randomness."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fairwin.decision.alternating import AlternatingProcedure, SequentialProcedure
from fairwin.decision.arms_decision import arms_verdict, decide_arms
from fairwin.decision.document import (
    ArmsOutcome,
    CellDecision,
    Decision,
    GuardResult,
    MetricResult,
    Noise,
    Stopping,
    level_text,
)
from fairwin.decision.inputs import ArchiveNoise, DecisionRow, WindowContext
from fairwin.decision.paired import Verdict, verdict_for
from fairwin.decision.procedures import LaunchProcedure, Procedure, Win2Procedure
from fairwin.decision.sequential import judge_looks
from fairwin.decision.table import CellTable, arrange, off_off_spread_pct
from fairwin.decision.validity import check_validity
from fairwin.rows import metric_source
from fairwin.rules.spec import RuleSpec


def procedure_for(rule: RuleSpec, archive: dict[str, ArchiveNoise]) -> Procedure:
    """The procedure named after the rule's kind."""
    if rule.kind == "win2":
        return Win2Procedure(rule)
    kinds: dict[str, type[LaunchProcedure | AlternatingProcedure]] = {
        "launch": LaunchProcedure,
        "alternating": AlternatingProcedure,
        "sequential": SequentialProcedure,
    }
    return kinds[rule.kind](rule, archive)


def _metric(procedure: Procedure, table: CellTable, metric: str, rule: RuleSpec) -> MetricResult:
    higher = rule.higher_is_better(metric)
    if table.missing(metric):
        return MetricResult(
            metric=metric,
            higher_is_better=higher,
            verdict="INCONCLUSIVE",
            estimate=None,
            reasons=[table.why_missing(metric)],
        )
    try:
        estimate = procedure.estimate(table, metric, rule.confidence)
    except ValueError as exc:  # a non-positive control mean has no percentage
        return MetricResult(
            metric=metric, higher_is_better=higher, verdict="INCONCLUSIVE", estimate=None, reasons=[str(exc)]
        )
    verdict = verdict_for(estimate, rule.bar_pct, higher)
    reason = (
        f"{metric} {estimate.point_pct:+.2f} % [{estimate.ci_low_pct:+.2f}, {estimate.ci_high_pct:+.2f}] "
        f"({estimate.method}, {level_text(rule.confidence)}, df {estimate.df:g}), bar {rule.bar_pct:g} %"
        + ("" if higher else ", lower is better")
    )
    return MetricResult(metric=metric, higher_is_better=higher, verdict=verdict, estimate=estimate, reasons=[reason])


def _noise(table: CellTable, rule: RuleSpec, context: WindowContext) -> Noise:
    spread = off_off_spread_pct(table, rule.primary)
    archive = context.noise(table.cell, rule.primary)
    notes: list[str] = []
    if archive is None or archive.launch_cv_pct is None:
        notes.append("no archived control starts match this cell; only the in-window spread is known")
    elif archive.launch_cv_pct > rule.bar_pct:
        notes.append(
            f"the archive's day-to-day spread ({archive.launch_cv_pct:.2f} %) is larger than the {rule.bar_pct:g} % "
            "bar: launch-to-launch noise alone can cross it"
        )
    if spread and max(spread) > rule.bar_pct:
        outer = "bracketing starts" if len(table.starts) == 3 else f"{table.kinds['s1']} starts"
        notes.append(f"the {outer} disagree by up to {max(spread):.2f} %, more than the bar")
    return Noise(metric=rule.primary, bar_pct=rule.bar_pct, off_off_spread_pct=spread, archive=archive, notes=notes)


def guard_reason(guard: GuardResult) -> str:
    """The cell reason a failed guard gives."""
    return f"guard {guard.metric} FAILED: {guard.detail}"


def _with_guards(verdict: Verdict, guards: Sequence[GuardResult], valid: bool) -> Verdict:
    if not valid:
        return "INCONCLUSIVE"
    if any(g.failed for g in guards):
        return "LOSS"
    return verdict


def decide_cell(rows: Sequence[DecisionRow], cell: str, rule: RuleSpec, context: WindowContext) -> CellDecision:
    decides = cell not in context.reported
    table = arrange(rows, cell, context.order, rule.start_count)
    empty: dict[str, Any] = {
        "validity": None,
        "primary": None,
        "guards": [],
        "reported": [],
        "checklist_literal": None,
        "noise": None,
    }
    problems = list(table.problems)
    if rule.kind == "win2" and table.order != "control-first" and not problems:
        problems.append(f"{rule.id} is registered for control-first windows; this one ran {table.order}")
    if problems:
        return CellDecision(cell=cell, decides=decides, verdict="INCONCLUSIVE", reasons=problems, **empty)
    validity = check_validity(table, context)  # every start is there: its clocks are judged whatever is missing
    missing = [m for m in (rule.primary, *rule.guards) if table.missing(m)]
    if missing:
        reasons = [f"{table.why_missing(m)}; {rule.id} needs it" for m in missing] + list(validity.conditions)
        return CellDecision(
            cell=cell, decides=decides, verdict="INCONCLUSIVE", reasons=reasons, **(empty | {"validity": validity})
        )

    procedure = procedure_for(rule, {a.metric: a for a in context.archive if a.cell == cell})
    primary = _metric(procedure, table, rule.primary, rule)
    guards = [procedure.guard(table, metric) for metric in rule.guards]
    verdict = _with_guards(primary.verdict, guards, validity.valid)
    reasons = list(validity.conditions) + primary.reasons + [guard_reason(g) for g in guards if g.failed]
    checklist = None
    if rule.checklist_primary is not None:
        literal = _metric(procedure, table, rule.checklist_primary, rule)
        checklist = literal.model_copy(update={"verdict": _with_guards(literal.verdict, guards, validity.valid)})
    return CellDecision(
        cell=cell,
        decides=decides,
        verdict=verdict,
        reasons=reasons,
        validity=validity,
        primary=primary,
        guards=guards,
        reported=[_metric(procedure, table, metric, rule) for metric in rule.reported],
        checklist_literal=checklist,
        noise=_noise(table, rule, context),
    )


def window_verdict(cells: Sequence[CellDecision]) -> tuple[Verdict, list[str]]:
    """INCONCLUSIVE if any decision cell is; else LOSS if any; else WIN if all WIN; NO-CHANGE if all are."""
    deciding = [c for c in cells if c.decides]
    if not deciding:
        return "INCONCLUSIVE", ["no decision cell has data"]
    blocking: tuple[Verdict, ...] = ("INCONCLUSIVE", "LOSS")
    for verdict in blocking:
        hit = [c.cell for c in deciding if c.verdict == verdict]
        if hit:
            return verdict, [f"{verdict} in {', '.join(hit)}"]
    unanimous: tuple[Verdict, ...] = ("WIN", "NO-CHANGE")
    for verdict in unanimous:
        if all(c.verdict == verdict for c in deciding):
            return verdict, [f"every decision cell is {verdict}"]
    others = [f"{c.cell} {c.verdict}" for c in deciding if c.verdict != "WIN"]
    return "NEUTRAL", [f"not every decision cell WINs: {', '.join(others)}"]


def _many_arms(
    rows: Sequence[DecisionRow], rule: RuleSpec, context: WindowContext
) -> tuple[list[CellDecision], Verdict, list[str], ArmsOutcome | None]:
    """A many-arm rule's cells, verdict, reasons and outcome; INCONCLUSIVE, naming why, when nothing decides."""
    found = decide_arms(rows, rule, context)
    if isinstance(found, list):
        return (
            [CellDecision.unjudged(c, c not in context.reported, found) for c in context.cells],
            "INCONCLUSIVE",
            found,
            None,
        )
    cells, outcome = found
    verdict, reasons = arms_verdict(outcome.arms)
    return cells, verdict, [*reasons, outcome.ranking.line, outcome.line()], outcome


def decide(rows: Sequence[DecisionRow], *, rule: RuleSpec, context: WindowContext) -> Decision:
    stopping, arms = None, None
    if rule.kind == "arms":
        cells, verdict, reasons, arms = _many_arms(rows, rule, context)
        return _decision(rule, context, cells, (verdict, reasons), None, arms)
    if rule.kind == "sequential":
        cells, stopping = judge_looks(rows, rule, context, decide_cell, window_verdict)
    else:
        cells = [decide_cell(rows, cell, rule, context) for cell in context.cells]
    verdict, reasons = window_verdict(cells)
    if stopping is not None:
        reasons = [*reasons, stopping.line(verdict)]
    return _decision(rule, context, cells, (verdict, reasons), stopping, arms)


def _decision(
    rule: RuleSpec,
    context: WindowContext,
    cells: list[CellDecision],
    said: tuple[Verdict, list[str]],
    stopping: Stopping | None,
    arms: ArmsOutcome | None,
) -> Decision:
    verdict, reasons = said
    if context.greedy is not None:
        reasons = [*reasons, context.greedy.line()]
    if context.unobserved:
        reasons = [*reasons, f"unobserved: {'; '.join(context.unobserved)}"]
    return Decision(
        window_id=context.window_id,
        mode=context.mode,
        order=context.order,
        rule_id=rule.id,
        rule=rule,
        rule_sha256=rule.sha256,
        primary_source=metric_source(rule.primary),
        counters=context.counters,
        verdict=verdict,
        reasons=reasons,
        cells=cells,
        greedy=context.greedy,
        sequential=stopping,
        unobserved=context.unobserved,
        arms=arms,
    )
