"""A many-arm window's decision: every candidate's verdict and cells at the look that settled it, the looks,
and the best of the WINs. Pure: rows in, document parts out (decide.py puts them in the Decision)."""

from __future__ import annotations

from collections.abc import Sequence

from fairwin.decision.arms import ArmsFit, ArmsTable, arm_estimate, arrange_arms, control_spread, fit_metric
from fairwin.decision.arms_rounds import (
    CellState,
    Fits,
    Judged,
    Levels,
    Rounds,
    fits_at,
    judge,
    levels_at,
    run_rounds,
    signed,
)
from fairwin.decision.document import (
    Arm,
    ArmLook,
    ArmsOutcome,
    CellDecision,
    Ended,
    GuardResult,
    LookVerdict,
    MetricResult,
    Noise,
    Ranking,
)
from fairwin.decision.inputs import DecisionRow, WindowContext
from fairwin.decision.paired import Verdict, verdict_for
from fairwin.decision.validity import check_validity
from fairwin.rules.spec import RuleSpec

#: A cell's verdict from its state at the look: one that cannot WIN, or is still open, is NEUTRAL.
CELL_VERDICTS: dict[CellState, Verdict] = {
    "WIN": "WIN",
    "LOSS": "LOSS",
    "NO-CHANGE": "NO-CHANGE",
    "INCONCLUSIVE": "INCONCLUSIVE",
    "FUTILE": "NEUTRAL",
    "OPEN": "NEUTRAL",
}
#: The level of the interval that says whether the best WIN is separated from the next.
RANKING_CONFIDENCE = 0.95


def _metric(
    table: ArmsTable, fit: ArmsFit | str, candidate: str, metric: str, rule: RuleSpec, level: float, verdict: Verdict
) -> MetricResult:
    higher = rule.higher_is_better(metric)
    if isinstance(fit, str):
        return MetricResult(
            metric=metric, higher_is_better=higher, verdict="INCONCLUSIVE", estimate=None, reasons=[fit]
        )
    estimate = arm_estimate(table, fit, candidate, metric, level, None)
    said = f"{metric} {estimate.point_pct:+.2f} % [{estimate.ci_low_pct:+.2f}, {estimate.ci_high_pct:+.2f}] (arms)"
    return MetricResult(metric=metric, higher_is_better=higher, verdict=verdict, estimate=estimate, reasons=[said])


def _cell(
    fits: Fits, candidate: str, rule: RuleSpec, context: WindowContext, levels: Levels, judged: Judged
) -> CellDecision:
    """One candidate's decision in one cell at one look, from that look's fits."""
    table = fits.table
    verdict: Verdict = CELL_VERDICTS[judged.state]
    primary = fits.by_metric[rule.primary]
    primary_result = _metric(table, primary, candidate, rule.primary, rule, levels.win, verdict)
    if isinstance(primary, ArmsFit):
        estimate = arm_estimate(table, primary, candidate, rule.primary, levels.win, levels.equivalence)
        primary_result = primary_result.model_copy(update={"estimate": estimate, "reasons": [judged.reasons[0]]})
    guards = []
    for metric in rule.guards:
        fit = fits.by_metric[metric]
        if isinstance(fit, str):
            guards.append(GuardResult(metric=metric, failed=None, detail=fit))
            continue
        estimate = arm_estimate(table, fit, candidate, metric, levels.guard, None)
        failed = any(line.startswith(f"guard {metric} ") for line in judged.guards_failed)
        detail = f"{metric} {estimate.point_pct:+.2f} % [{estimate.ci_low_pct:+.2f}, {estimate.ci_high_pct:+.2f}]"
        guards.append(GuardResult(metric=metric, failed=failed, detail=detail, estimate=estimate))
    reported = []
    for metric in rule.reported:
        fit = fit_metric(table, metric, rule, context)
        found = _metric(table, fit, candidate, metric, rule, rule.confidence, "NEUTRAL")
        if found.estimate is not None:
            found = found.model_copy(
                update={"verdict": verdict_for(found.estimate, rule.bar_pct, found.higher_is_better)}
            )
        reported.append(found)
    return CellDecision(
        cell=table.cell,
        decides=table.cell not in context.reported,
        verdict=verdict,
        reasons=list(judged.reasons),
        validity=check_validity(table.pair(candidate), context),
        primary=primary_result,
        guards=guards,
        reported=reported,
        checklist_literal=None,
        noise=Noise(
            metric=rule.primary,
            bar_pct=rule.bar_pct,
            off_off_spread_pct=control_spread(table, rule.primary),
            archive=context.noise(table.cell, rule.primary),
            notes=[],
        ),
    )


def _arm(candidate: str, found: Rounds, tables: dict[str, ArmsTable], rule: RuleSpec, context: WindowContext) -> Arm:
    """The candidate at the look that settled it (else the last look)."""
    index = found.settled_at.get(candidate, len(found.looks) - 1)
    look = found.looks[index]
    failure = next((f for f in context.failed_starts if f.candidate == candidate), None)
    if failure is not None:
        why = f"its start {failure.start} (round {failure.round}) failed: {failure.error}"
        cells = [CellDecision.unjudged(cell, cell not in context.reported, [why]) for cell in tables]
        dropped = index < len(found.looks) - 1 or failure.round < look.round
        return Arm(
            candidate=candidate,
            verdict="INCONCLUSIVE",
            settled_after_round=look.round,
            dropped=dropped,
            why=why,
            cells=cells,
        )
    levels = levels_at(rule, len(found.candidates), look.index)
    judged = look.judged.get(candidate, {})
    cells = []
    for cell, table in tables.items():
        # A deciding cell's fits are the look's; a reported cell's are made here, from the same starts.
        fits = look.fits.get(cell) or fits_at(table.upto(look.after), rule, context)
        judged_here = judged.get(cell) or judge(fits, candidate, rule, levels, context)
        cells.append(_cell(fits, candidate, rule, context, levels, judged_here))
    state = look.states[candidate]
    verdict: Verdict = "NEUTRAL" if state == "OPEN" else state
    settled = candidate in found.settled_at
    first = next((c for c in cells if c.decides), cells[0])
    if not settled:
        why = f"still open after round {found.rounds_run}: {first.reasons[0] if first.reasons else 'no look'}"
    else:
        said = "cannot WIN" if verdict == "NEUTRAL" else verdict
        why = f"{said} at the look after round {look.round}: {first.reasons[0] if first.reasons else ''}"
    return Arm(
        candidate=candidate,
        verdict=verdict,
        settled_after_round=look.round if settled else None,
        dropped=settled and index < len(found.looks) - 1,
        why=why,
        cells=cells,
    )


def _ranked(
    best: str | None, runner_up: str | None, difference: tuple[float, float, float] | None, line: str
) -> Ranking:
    separated = difference[1] > 0 if difference is not None else None
    return Ranking(
        best=best,
        runner_up=runner_up,
        difference_pct=difference,
        confidence=RANKING_CONFIDENCE,
        separated=separated,
        line=line,
    )


def _ranking(arms: Sequence[Arm], found: Rounds, rule: RuleSpec) -> Ranking:
    """The best WIN by its point in the first deciding cell, over every start the window ran (its last look's
    fit)."""
    wins = [a.candidate for a in arms if a.verdict == "WIN"]
    fit = next(iter(found.looks[-1].fits.values())).by_metric[rule.primary]
    higher = rule.higher_is_better(rule.primary)
    if not wins:
        return _ranked(None, None, None, "no candidate WINs")
    if isinstance(fit, str):
        return _ranked(None, None, None, f"the WINs ({', '.join(wins)}) cannot be ranked over every start: {fit}")
    ranked = sorted(wins, key=lambda c: -signed(fit.interval(c, RANKING_CONFIDENCE), higher)[0])
    best = ranked[0]
    point = signed(fit.interval(best, RANKING_CONFIDENCE), higher)[0]
    if len(ranked) == 1:
        return _ranked(best, None, None, f"{best} is the only candidate that WINs ({point:+.2f} %)")
    runner_up = ranked[1]
    difference = signed(fit.difference(best, runner_up, RANKING_CONFIDENCE), higher)
    shown = f"{difference[0]:+.2f} % [{difference[1]:+.2f}, {difference[2]:+.2f}] (95%)"
    line = (
        f"{best} is best ({point:+.2f} %), separated from {runner_up}: {shown}"
        if difference[1] > 0
        else f"{best} is ahead ({point:+.2f} %) but not separated from {runner_up}: {shown} includes 0"
    )
    return _ranked(best, runner_up, difference, line)


def _look(found: Rounds, index: int, rule: RuleSpec) -> ArmLook:
    look = found.looks[index]
    assert rule.rounds
    still: LookVerdict = "NEUTRAL" if look.round >= rule.rounds[-1] else "CONTINUE"  # the last round ends it
    states: dict[str, LookVerdict] = {c: (still if s == "OPEN" else s) for c, s in look.states.items()}
    primary = {
        c: judged.primary
        for c, cells in look.judged.items()
        if (judged := next(iter(cells.values()))).primary is not None
    }
    return ArmLook(
        round=look.round,
        after=look.after,
        level=levels_at(rule, len(found.candidates), look.index).win,
        states=states,
        primary=primary,
    )


def decide_arms(
    rows: Sequence[DecisionRow], rule: RuleSpec, context: WindowContext
) -> tuple[list[CellDecision], ArmsOutcome] | list[str]:
    """Every candidate's decision and the window's outcome; or the problems that leave nothing to decide."""
    assert rule.rounds and rule.win_levels
    candidates = list(context.candidates)
    fewest, most = rule.candidates_allowed
    if not fewest <= len(candidates) <= most:
        return [f"{rule.id} decides {fewest} to {most} candidates; this window has {len(candidates)}"]
    tables = {cell: arrange_arms(rows, cell) for cell in context.cells}
    deciding = {cell: t for cell, t in tables.items() if cell not in context.reported}
    problems = [f"{cell}: {p}" for cell, t in deciding.items() for p in t.problems]
    if problems:
        return problems
    found = run_rounds(deciding, rule, context, candidates)
    if found.problems or not found.looks:
        return found.problems or [f"{found.rounds_run} whole round(s): the first look comes after {rule.rounds[0]}"]
    arms = [_arm(c, found, tables, rule, context) for c in candidates]
    ended: Ended = "decided" if found.decided else "maximum" if found.rounds_run >= rule.rounds[-1] else "short"
    if ended == "short" and context.stop_reason:
        ended = "budget"
    outcome = ArmsOutcome(
        candidates=candidates,
        arms=arms,
        looks=[_look(found, i, rule) for i in range(len(found.looks))],
        rounds_run=found.rounds_run,
        starts_used=found.starts_run,
        max_starts=rule.arm_starts(len(candidates)),
        ended=ended,
        ranking=_ranking(arms, found, rule),
        stop_reason=context.stop_reason,
    )
    shown = next((a for a in arms if a.candidate == outcome.ranking.best), arms[0])
    return shown.cells, outcome


def arms_verdict(arms: Sequence[Arm]) -> tuple[Verdict, list[str]]:
    """WIN when any candidate WINs; else the candidates' verdict when they agree; else INCONCLUSIVE when any is,
    else NEUTRAL."""
    wins = [a.candidate for a in arms if a.verdict == "WIN"]
    if wins:
        return "WIN", [f"WIN for {', '.join(wins)}"]
    verdicts = {a.verdict for a in arms}
    if len(verdicts) == 1:
        verdict = verdicts.pop()
        return verdict, [f"every candidate is {verdict}"]
    shown = ", ".join(f"{a.candidate} {a.verdict}" for a in arms)
    return ("INCONCLUSIVE" if "INCONCLUSIVE" in verdicts else "NEUTRAL"), [f"no candidate WINs: {shown}"]
