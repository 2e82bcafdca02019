"""The alternating procedure: control and candidate take turns over an odd number of starts.

Each start is one server launch, and on a shared machine launches differ and drift
(on the 2-core machine fairwin is developed on, the rate fell 5 to 10 % a start
through most windows, and single waves dropped by up to 60 %). With three starts the
launch level has one degree of freedom, so a rule that respects it can only decide
enormous effects. Here the window runs S = 2k + 1 starts, kinds alternating, and the
logarithm of each start's mean over its repeats is one observation of the model

    log mean_i = a + b * position_i + delta * candidate_i + e_i,    e_i ~ N(0, tau^2),

fitted by least squares (numpy). On the log scale an effect and a drift in % are both
additive, so a drift of a few % a start cancels whether the candidate is faster or
not. Alternating an odd number of starts puts the two kinds' mean positions at the
same place, so delta's estimate is the difference of the kinds' mean logs and a
linear drift cancels exactly; the residuals leave S - 3 degrees of freedom for tau^2,
pooled with the archive's launch spread (a relative s.d. is a log-scale s.d.) like
win2-launch-v1's, and never below the within-launch repeat variance over n. The
effect and its t interval are reported as % changes: 100 (exp(delta) - 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fairwin.decision.document import GuardResult
from fairwin.decision.inputs import ArchiveNoise
from fairwin.decision.paired import Estimate, check_control, make_estimate, t_quantile
from fairwin.decision.procedures import PlannedError, interval_guard, launch_error, pooled_tau2
from fairwin.decision.table import CellTable
from fairwin.rows import order_kinds
from fairwin.rules.spec import RuleSpec


@dataclass(frozen=True)
class LaunchFit:
    """The candidate's effect and the launch variance from one window's starts, on the log scale."""

    delta: float  # log(candidate / control)
    variance_factor: float  # var(delta) = factor * tau^2
    residual_var: float  # tau^2 from the residuals, on df
    df: float
    repeat_var: float  # within-launch variance of one repeat's log


def design_matrix(candidate: np.ndarray) -> np.ndarray:
    """Level, centred position (the drift) and the candidate flag, one row per start in run order."""
    starts = len(candidate)
    position = np.arange(starts, dtype=float) - (starts - 1) / 2.0
    return np.column_stack([np.ones(starts), position, candidate.astype(float)])


def fit_launches(values: np.ndarray, candidate: np.ndarray) -> LaunchFit:
    """``values``: starts x repeats, all positive, in run order; ``candidate``: one flag per start.

    A start's observation is the log of its mean over repeats: the start's rate.
    """
    starts, repeats = values.shape
    log_means = np.log(values.mean(axis=1))
    design = design_matrix(candidate)
    coefficients, residual_ss, rank, _ = np.linalg.lstsq(design, log_means, rcond=None)
    df = starts - rank
    residual_var = float(residual_ss[0]) / df if df > 0 and residual_ss.size else 0.0
    factor = float(np.linalg.inv(design.T @ design)[2, 2])
    logs = np.log(values)
    within = logs - logs.mean(axis=1, keepdims=True)
    df_repeat = starts * (repeats - 1)
    repeat_var = float((within**2).sum() / df_repeat) if df_repeat > 0 else 0.0
    return LaunchFit(float(coefficients[2]), factor, residual_var, float(df), repeat_var)


class AlternatingProcedure:
    """Kind ``alternating``: each start's mean a point of the drift-cancelling log-linear fit."""

    def __init__(self, rule: RuleSpec, archive: dict[str, ArchiveNoise]) -> None:
        self.rule = rule
        self.archive = archive  # by metric, for this cell

    def estimate(self, table: CellTable, metric: str, confidence: float) -> Estimate:
        control, candidate = table.control_candidate(metric)
        check_control(metric, control, candidate)
        values = table.matrix(metric)
        if (values <= 0).any():
            raise ValueError(f"{metric}: a start has a value <= 0; a ratio of rates needs positive values")
        flags = np.asarray([kind == "candidate" for kind in table.kinds.values()])
        found = fit_launches(values, flags)
        # On the log scale a relative s.d. is the s.d. itself: the archive's cv pools at a level of 1.
        tau2, df = pooled_tau2(found.residual_var, found.df, self.archive.get(metric), 1.0, self.rule.archive_df_share)
        if df <= 0:
            raise ValueError(f"{metric}: {len(flags)} starts leave no degree of freedom for the launch variance")
        tau2 = max(tau2, found.repeat_var / len(table.repeats))
        se = float(np.sqrt(found.variance_factor * tau2))
        delta = found.delta

        def interval(level: float) -> tuple[float, float]:
            half = t_quantile(0.5 + level / 2.0, df) * se
            return 100.0 * math.expm1(delta - half), 100.0 * math.expm1(delta + half)

        eq_level = self.rule.equivalence_confidence
        low, high = interval(confidence)
        eq_low, eq_high = interval(eq_level) if eq_level is not None else (None, None)
        made = make_estimate(metric, "alternating", control, candidate, (0.0, 0.0), confidence, df)
        return made.model_copy(
            update={
                "point_pct": 100.0 * math.expm1(delta),
                "ci_low_pct": low,
                "ci_high_pct": high,
                "equivalence_low_pct": eq_low,
                "equivalence_high_pct": eq_high,
                "equivalence_confidence": eq_level,
                "launch_cv_pct": 100.0 * math.sqrt(tau2),
            }
        )

    def guard(self, table: CellTable, metric: str) -> GuardResult:
        return interval_guard(self, self.rule, table, metric)

    def planned_error(self, noise: ArchiveNoise | None, repeats: int) -> PlannedError | None:
        """The fit's own variance factor for the rule's starts (either order gives the same one)."""
        kinds = order_kinds("control-first", self.rule.start_count)
        design = design_matrix(np.asarray([kind == "candidate" for kind in kinds.values()]))
        factor = float(np.linalg.inv(design.T @ design)[2, 2])
        return launch_error(noise, factor, float(self.rule.start_count - design.shape[1]), self.rule.archive_df_share)


class SequentialProcedure(AlternatingProcedure):
    """Kind ``sequential``: at each look, the alternating fit over the starts run so far, at the look's level
    (:func:`fairwin.decision.sequential.judge_looks` takes the looks)."""
