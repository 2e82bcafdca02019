"""The many-arm fit: one control against several candidates, every arm launched once a round.

Each start is one launch of one arm, and the log of its mean over its repeats is one observation of

    log mean_i = a + b * position_i + sum_k delta_k * arm_k(i) + e_i,    e_i ~ N(0, tau^2),

fitted by least squares (numpy) over every start of the window that ran, the dropped arms' too. The
drift and the launch variance are the whole window's: tau^2 has N - K - 2 degrees of freedom (N starts,
K candidates), growing with every arm's launches, and is pooled with the archive's launch spread at the
rule's share. As win2-alt7-v1's, it is never below the within-launch repeat variance over n: for one
candidate's effect, that of its own starts and the control's (an arm whose repeats vary more, a
speculative one whose acceptance differs from prompt to prompt, does not widen another's). Candidate
k's effect is delta_k, with var(delta_k) = [(X'X)^-1]_kk tau^2; the difference of two candidates is
the contrast of their deltas. Effects and intervals are reported as % changes: 100 (exp(delta) - 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairwin.decision.inputs import ArchiveNoise, WindowContext
from fairwin.decision.paired import Estimate, t_quantile
from fairwin.decision.procedures import PlannedError, launch_error, pooled_tau2
from fairwin.decision.table import CellTable
from fairwin.rows import DecisionRow
from fairwin.rules.spec import RuleSpec


@dataclass(frozen=True)
class ArmsTable:
    """One cell's starts in run order, each start's arm (None: the control) and its rows by repeat."""

    cell: str
    starts: tuple[str, ...]
    arms: tuple[str | None, ...]
    rows: dict[str, dict[int, DecisionRow]]
    repeats: list[int]  # complete in every start
    problems: list[str]

    def missing(self, metric: str) -> bool:
        return any(getattr(self.rows[s][r], metric) is None for s in self.starts for r in self.repeats)

    def matrix(self, metric: str) -> np.ndarray:
        """Starts x complete repeats, in run order; call only when not missing()."""
        return np.asarray([[float(getattr(self.rows[s][r], metric)) for r in self.repeats] for s in self.starts])

    def candidates(self) -> tuple[str, ...]:
        """The candidates with at least one start here, in run order of their first."""
        return tuple(dict.fromkeys(arm for arm in self.arms if arm is not None))

    def upto(self, starts: int) -> ArmsTable:
        """The table of the first ``starts`` starts that ran: what a look after them reads."""
        kept = self.starts[:starts]
        return ArmsTable(self.cell, kept, self.arms[:starts], {s: self.rows[s] for s in kept}, self.repeats, [])

    def pair(self, candidate: str) -> CellTable:
        """The control's starts and one candidate's, as a two-arm table: what the clock checks read."""
        kept = {s: self.rows[s] for s, arm in zip(self.starts, self.arms, strict=True) if arm in (None, candidate)}
        return CellTable(cell=self.cell, rows=kept, repeats=self.repeats, order="control-first", problems=[])


def arrange_arms(rows: Sequence[DecisionRow], cell: str) -> ArmsTable:
    """The cell's rows by start (in the order they ran: s1, s2, ...; a dropped arm's starts never ran) and repeat.
    A candidate's rows name it by their role."""
    table: dict[str, dict[int, DecisionRow]] = {}
    arms: dict[str, str | None] = {}
    problems: list[str] = []
    for row in rows:
        if row.cell != cell:
            continue
        table.setdefault(row.start, {})
        if row.repeat in table[row.start]:
            problems.append(f"{row.start} repeat {row.repeat} appears twice")
        table[row.start][row.repeat] = row
        arm = None if row.kind == "control" else row.role
        if arms.setdefault(row.start, arm) != arm:
            problems.append(f"{row.start}'s rows name two arms")
    starts = tuple(sorted(table, key=lambda s: int(s[1:])))
    repeats = sorted(set.intersection(*(set(table[s]) for s in starts))) if starts else []
    incomplete = sorted(set.union(*(set(table[s]) for s in starts)) - set(repeats)) if starts else []
    if incomplete:
        problems.append(f"repeats {incomplete} are missing from some start")
    if len(repeats) < 2:
        problems.append(f"{len(repeats)} complete repeat(s); an interval needs at least 2")
    if not any(arms[s] is None for s in starts):
        problems.append("no control start has rows")
    return ArmsTable(cell, starts, tuple(arms[s] for s in starts), table, repeats, problems)


@dataclass(frozen=True)
class ArmsFit:
    """Every candidate's effect and the window's launch variance, on the log scale."""

    candidates: tuple[str, ...]
    deltas: np.ndarray  # log(candidate / control), one per candidate
    factors: np.ndarray  # (X'X)^-1 over the candidates' columns: cov(deltas) = factors * tau^2
    pooled_tau2: float  # the window's launch variance pooled with the archive's
    df: float
    floors: dict[str | None, float]  # each arm's within-launch repeat variance over n (None: the control's)

    def index(self, candidate: str) -> int:
        return self.candidates.index(candidate)

    def tau2(self, *arms: str | None) -> float:
        """The launch variance a comparison of ``arms`` reads: the pooled one, never below their floors' mean."""
        return max(self.pooled_tau2, sum(self.floors[arm] for arm in arms) / len(arms))

    def interval(self, candidate: str, level: float) -> tuple[float, float, float]:
        """(point, low, high) in % of one candidate's effect, two-sided at ``level``."""
        k = self.index(candidate)
        half = t_quantile(0.5 + level / 2.0, self.df) * math.sqrt(self.factors[k, k] * self.tau2(None, candidate))
        delta = float(self.deltas[k])
        return 100.0 * math.expm1(delta), 100.0 * math.expm1(delta - half), 100.0 * math.expm1(delta + half)

    def difference(self, first: str, second: str, level: float) -> tuple[float, float, float]:
        """(point, low, high) in % of ``first`` over ``second``, two-sided at ``level``."""
        i, j = self.index(first), self.index(second)
        variance = (self.factors[i, i] + self.factors[j, j] - 2.0 * self.factors[i, j]) * self.tau2(first, second)
        half = t_quantile(0.5 + level / 2.0, self.df) * math.sqrt(max(variance, 0.0))
        delta = float(self.deltas[i] - self.deltas[j])
        return 100.0 * math.expm1(delta), 100.0 * math.expm1(delta - half), 100.0 * math.expm1(delta + half)


def fit_arms(table: ArmsTable, metric: str, archive: ArchiveNoise | None, share: float | None) -> ArmsFit:
    """The fit of ``metric`` over the table's starts; ValueError when it cannot be made (a value <= 0, or no
    degree of freedom left for the launch variance)."""
    values = table.matrix(metric)
    if (values <= 0).any():
        raise ValueError(f"{metric}: a start has a value <= 0; a ratio of rates needs positive values")
    candidates = table.candidates()
    starts, repeats = values.shape
    position = np.arange(starts, dtype=float) - (starts - 1) / 2.0
    flags = [[arm == c for arm in table.arms] for c in candidates]
    design = np.column_stack([np.ones(starts), position, *np.asarray(flags, dtype=float).reshape(-1, starts)])
    log_means = np.log(values.mean(axis=1))
    coefficients, residual_ss, rank, _ = np.linalg.lstsq(design, log_means, rcond=None)
    if rank < design.shape[1]:
        raise ValueError(f"{metric}: the starts so far cannot separate the drift from every arm")
    df = starts - rank
    residual_var = float(residual_ss[0]) / df if df > 0 and residual_ss.size else 0.0
    # On the log scale a relative s.d. is the s.d. itself: the archive's cv pools at a level of 1.
    tau2, pooled_df = pooled_tau2(residual_var, float(df), archive, 1.0, share)
    if pooled_df <= 0:
        raise ValueError(f"{metric}: {starts} starts leave no degree of freedom for the launch variance")
    logs = np.log(values)
    within = (logs - logs.mean(axis=1, keepdims=True)) ** 2
    floors = {}
    for arm in (None, *candidates):
        mine = [i for i, found in enumerate(table.arms) if found == arm]
        df_repeat = len(mine) * (repeats - 1)
        floors[arm] = float(within[mine].sum() / df_repeat) / repeats if df_repeat > 0 else 0.0
    factors = np.linalg.inv(design.T @ design)[2:, 2:]
    return ArmsFit(candidates, coefficients[2:], factors, tau2, pooled_df, floors)


def arms_planned_error(rule: RuleSpec, noise: ArchiveNoise | None) -> PlannedError | None:
    """The standard error of one candidate's effect after a many-arm rule's last round, at the archive's launch
    spread: R launches of the candidate against R of the control (2 / R launch variances), the drift's cost left
    out; its degrees of freedom a window of two candidates' (the fewest: 3 R - 4) and the archive's share."""
    if not rule.rounds:
        return None
    rounds = rule.rounds[-1]
    return launch_error(noise, 2.0 / rounds, float(3 * rounds - 4), rule.archive_df_share)


def arm_estimate(
    table: ArmsTable, fit: ArmsFit, candidate: str, metric: str, level: float, eq: float | None
) -> Estimate:
    """One candidate's effect on ``metric`` as the decision states it: per repeat, the mean of the control's starts
    and of the candidate's, and the fit's point and interval at ``level`` (and the equivalence interval at ``eq``)."""
    values = table.matrix(metric)
    control = values[[arm is None for arm in table.arms]].mean(axis=0)
    treated = values[[arm == candidate for arm in table.arms]].mean(axis=0)
    point, low, high = fit.interval(candidate, level)
    eq_low, eq_high = fit.interval(candidate, eq)[1:] if eq is not None else (None, None)
    return Estimate(
        metric=metric,
        method="arms",
        n=len(table.repeats),
        control=control.tolist(),
        candidate=treated.tolist(),
        deltas=(treated - control).tolist(),
        control_mean=float(control.mean()),
        candidate_mean=float(treated.mean()),
        point_pct=point,
        ci_low_pct=low,
        ci_high_pct=high,
        confidence=level,
        df=fit.df,
        equivalence_low_pct=eq_low,
        equivalence_high_pct=eq_high,
        equivalence_confidence=eq,
        launch_cv_pct=100.0 * float(np.sqrt(fit.tau2(None, candidate))),
    )


def control_spread(table: ArmsTable, metric: str) -> list[float]:
    """Per repeat, how far the control's starts disagree: (max - min) / mean, in % (none with one control start)."""
    if table.missing(metric):
        return []
    values = table.matrix(metric)[[arm is None for arm in table.arms]]
    if len(values) < 2:
        return []
    return [float(x) for x in 100.0 * np.ptp(values, axis=0) / values.mean(axis=0)]


def fit_metric(table: ArmsTable, metric: str, rule: RuleSpec, context: WindowContext) -> ArmsFit | str:
    """The fit of one metric, or why it cannot be made (the metric unobserved somewhere, a value <= 0, no degree of
    freedom left)."""
    if table.missing(metric):
        return f"{metric} unobserved in some start of {table.cell}"
    try:
        return fit_arms(table, metric, context.noise(table.cell, metric), rule.archive_df_share)
    except ValueError as exc:
        return str(exc)
