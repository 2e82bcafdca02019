"""From pooled rows to a decision document. Pure: no I/O, no clock, no randomness."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from fairwin.decision.paired import PairedEstimate, Verdict, paired_estimate, verdict_for
from fairwin.decision.rules import RuleSpec
from fairwin.metrics.pool import PooledRow

DECISION_FORMAT = "fairwin.decision/1"
STARTS = ("s1", "s2", "s3")


class CellDecision(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cell: str
    decides: bool
    verdict: Verdict
    reasons: list[str]
    primary: PairedEstimate | None


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: str = DECISION_FORMAT
    window_id: str
    mode: str
    rule_id: str
    rule: RuleSpec
    rule_sha256: str
    verdict: Verdict
    reasons: list[str]
    cells: list[CellDecision]


def _series(rows: Sequence[PooledRow], cell: str, start: str, metric: str) -> dict[int, float | None]:
    return {row.repeat: getattr(row, metric) for row in rows if row.cell == cell and row.start == start}


def decide_cell(rows: Sequence[PooledRow], cell: str, decides: bool, rule: RuleSpec) -> CellDecision:
    series = {start: _series(rows, cell, start, rule.primary) for start in STARTS}
    repeats = sorted(set.intersection(*(set(s) for s in series.values())))
    incomplete = sorted(set.union(*(set(s) for s in series.values())) - set(repeats))
    values = {start: [series[start][r] for r in repeats] for start in STARTS}
    problems: list[str] = []
    if incomplete:
        problems.append(f"repeats {incomplete} are missing from some start")
    if any(v is None or not math.isfinite(v) for vs in values.values() for v in vs):
        problems.append(f"{rule.primary} is missing in some repeat")
    if len(repeats) < 2:
        problems.append(f"{len(repeats)} complete repeat(s); the paired-t interval needs at least 2")
    if problems:
        return CellDecision(cell=cell, decides=decides, verdict="INCONCLUSIVE", reasons=problems, primary=None)
    clean = {start: [float(v) for v in vs if v is not None] for start, vs in values.items()}
    estimate = paired_estimate(rule.primary, clean["s1"], clean["s2"], clean["s3"], rule.confidence)
    verdict = verdict_for(estimate, rule.bar_pct, rule.higher_is_better)
    reason = (
        f"{rule.primary} {estimate.point_pct:+.2f} % "
        f"[{estimate.ci_low_pct:+.2f}, {estimate.ci_high_pct:+.2f}] at {rule.confidence:.0%}, bar {rule.bar_pct:g} %"
    )
    return CellDecision(cell=cell, decides=decides, verdict=verdict, reasons=[reason], primary=estimate)


def window_verdict(cells: Sequence[CellDecision]) -> tuple[Verdict, list[str]]:
    deciding = [c for c in cells if c.decides]
    blocking: tuple[Verdict, ...] = ("INCONCLUSIVE", "LOSS")
    for verdict in blocking:
        hit = [c.cell for c in deciding if c.verdict == verdict]
        if hit:
            return verdict, [f"{verdict} in {', '.join(hit)}"]
    if deciding and all(c.verdict == "WIN" for c in deciding):
        return "WIN", ["every decision cell WINs"]
    neutral = [c.cell for c in deciding if c.verdict == "NEUTRAL"]
    return "NEUTRAL", [f"no clear win in {', '.join(neutral)}"]


def decide(
    rows: Sequence[PooledRow], *, window_id: str, mode: str, rule: RuleSpec, decision_cells: dict[str, bool]
) -> Decision:
    """``decision_cells`` maps each cell to whether it decides (False: reported only)."""
    cells = [decide_cell(rows, name, decides, rule) for name, decides in decision_cells.items()]
    verdict, reasons = window_verdict(cells)
    return Decision(
        window_id=window_id,
        mode=mode,
        rule_id=rule.id,
        rule=rule,
        rule_sha256=rule.sha256,
        verdict=verdict,
        reasons=reasons,
        cells=cells,
    )
