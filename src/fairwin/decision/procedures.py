"""How each kind of rule estimates a metric and judges a guard.

``win2`` (win2-v1): a paired-t interval over repeats; a guard fails when the
candidate is below *both* controls of a repeat in ``guard_fail_repeats`` repeats.

``launch`` (win2-launch-v1): a two-level interval. Each start is one server launch
and its repeats share it, so repeats alone cannot see launch-to-launch variation.
With tau^2 the variance of one launch's mean (launch variance plus repeat variance
over n), the difference d = candidate - control (one launch against the mean of two,
or the mean of two against one) has variance 1.5 tau^2. tau^2 is estimated from the
in-window bracketing pair ((x1 - x3)^2 / 2, 1 degree of freedom) pooled with the
archive's launch-to-launch spread (starts - 1 degrees of freedom), and never below
the within-launch repeat variance over n.

``alternating`` (win2-alt7-v1) lives in :mod:`fairwin.decision.alternating`, built on
this module's pooling and interval guard.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from fairwin.decision.document import GuardResult, level_text
from fairwin.decision.inputs import ArchiveNoise
from fairwin.decision.paired import Estimate, check_control, make_estimate, paired_t, t_quantile
from fairwin.decision.table import CellTable
from fairwin.rules.spec import RuleSpec


@dataclass(frozen=True)
class PlannedError:
    """The standard error a procedure would give its primary, in %, at a given noise: for the power check."""

    se_pct: float
    df: float
    source: str  # which noise it rests on, in words


class Procedure(Protocol):
    def estimate(self, table: CellTable, metric: str, confidence: float) -> Estimate: ...

    def guard(self, table: CellTable, metric: str) -> GuardResult: ...

    def planned_error(self, noise: ArchiveNoise | None, repeats: int) -> PlannedError | None:
        """The SE this procedure's interval would have at ``noise`` (None: the noise does not say)."""


class Win2Procedure:
    """Kind ``win2``: the runbook's paired repeats, each candidate repeat against its control bracket."""

    def __init__(self, rule: RuleSpec) -> None:
        self.rule = rule

    def estimate(self, table: CellTable, metric: str, confidence: float) -> Estimate:
        control, candidate = table.control_candidate(metric)
        return paired_t(metric, control.tolist(), candidate.tolist(), confidence)

    def guard(self, table: CellTable, metric: str) -> GuardResult:
        first, middle, last = table.bracket(metric)
        below = [r for r, s1, s2, s3 in zip(table.repeats, first, middle, last, strict=True) if s2 < min(s1, s3)]
        need = self.rule.guard_fail_repeats
        assert need is not None  # every win2 rule registers it (RuleSpec's validation)
        failed = len(below) >= need
        detail = (
            f"candidate below both controls in {len(below)} of {len(table.repeats)} repeats "
            f"(fails at {need}): repeats {below}"
        )
        return GuardResult(metric=metric, failed=failed, detail=detail, repeats_below=below)

    def planned_error(self, noise: ArchiveNoise | None, repeats: int) -> PlannedError | None:
        # Repeats within one launch: candidate minus the mean of two controls has 1.5 repeat variances over n.
        if noise is None or noise.repeat_cv_pct is None or repeats < 2:
            return None
        return PlannedError(
            se_pct=noise.repeat_cv_pct * math.sqrt(1.5 / repeats),
            df=float(repeats - 1),
            source=f"the archive's within-launch repeat cv of {noise.repeat_cv_pct:.2f} % and {repeats} repeats",
        )


def pooled_variance(table: CellTable, metric: str) -> tuple[float, float, float]:
    """(tau^2 from the bracketing pair, within-launch repeat variance, its degrees of freedom)."""
    first, middle, last = table.bracket(metric)
    pair = float((first.mean() - last.mean()) ** 2 / 2.0)
    residuals = np.concatenate([x - x.mean() for x in (first, middle, last)])
    df_repeat = 3 * (len(first) - 1)
    repeat_var = float((residuals**2).sum() / df_repeat) if df_repeat > 0 else 0.0
    return pair, repeat_var, float(df_repeat)


def archive_df(archive: ArchiveNoise | None, share: float | None) -> float:
    """The degrees of freedom an archive's launch spread is counted on: its starts - 1, times the rule's
    ``archive_df_share`` (unset: all of them); 0 without a usable archive."""
    if archive is None or archive.launch_cv_pct is None or archive.starts < 2:
        return 0.0
    return float(archive.starts - 1) * (share if share is not None else 1.0)


def pooled_tau2(
    window_var: float, window_df: float, archive: ArchiveNoise | None, control_mean: float, share: float | None = None
) -> tuple[float, float]:
    """One launch's variance, the window's estimate pooled with the archive's by degrees of freedom (the
    archive's counted at the rule's ``share``)."""
    weight_archive = archive_df(archive, share)
    archive_var = 0.0
    if archive is not None and archive.launch_cv_pct is not None and weight_archive > 0:
        archive_var = (archive.launch_cv_pct / 100.0 * control_mean) ** 2
    df = window_df + weight_archive
    if df <= 0:  # no degree of freedom at all (three alternating starts, no archive): the caller refuses
        return 0.0, 0.0
    return (window_df * window_var + weight_archive * archive_var) / df, df


def launch_error(
    noise: ArchiveNoise | None, variance_factor: float, window_df: float, share: float | None = None
) -> PlannedError | None:
    """SE of an effect whose variance is ``variance_factor`` launch variances, at the archive's launch cv."""
    if noise is None or noise.launch_cv_pct is None or noise.starts < 2:
        return None
    return PlannedError(
        se_pct=noise.launch_cv_pct * math.sqrt(variance_factor),
        df=window_df + archive_df(noise, share),
        source=f"the archive's launch-to-launch cv of {noise.launch_cv_pct:.2f} % over {noise.starts} control starts",
    )


class LaunchProcedure:
    """Kind ``launch``: win2's question with the launch as a unit of variance (launches, and repeats within one)."""

    #: var(candidate - control) in launch variances: one launch against the mean of two.
    VARIANCE_FACTOR = 1.5
    #: Degrees of freedom the window's own bracketing pair gives the launch variance.
    WINDOW_DF = 1.0

    def __init__(self, rule: RuleSpec, archive: dict[str, ArchiveNoise]) -> None:
        self.rule = rule
        self.archive = archive  # by metric, for this cell

    def tau2(self, table: CellTable, metric: str, control_mean: float) -> tuple[float, float]:
        pair, repeat_var, _ = pooled_variance(table, metric)
        tau2, df = pooled_tau2(pair, self.WINDOW_DF, self.archive.get(metric), control_mean, self.rule.archive_df_share)
        return max(tau2, repeat_var / len(table.repeats)), df

    def estimate(self, table: CellTable, metric: str, confidence: float) -> Estimate:
        control, candidate = table.control_candidate(metric)
        control_mean = check_control(metric, control, candidate)
        tau2, df = self.tau2(table, metric, control_mean)
        se = float(np.sqrt(self.VARIANCE_FACTOR * tau2))
        point = float((candidate - control).mean())

        def interval(level: float) -> tuple[float, float]:
            half = t_quantile(0.5 + level / 2.0, df) * se
            return point - half, point + half

        eq_level = self.rule.equivalence_confidence
        equivalence = (*interval(eq_level), eq_level) if eq_level is not None else None
        return make_estimate(
            metric,
            "two-level",
            control,
            candidate,
            interval(confidence),
            confidence,
            df,
            equivalence,
            float(np.sqrt(tau2)),
        )

    def guard(self, table: CellTable, metric: str) -> GuardResult:
        return interval_guard(self, self.rule, table, metric)

    def planned_error(self, noise: ArchiveNoise | None, repeats: int) -> PlannedError | None:
        return launch_error(noise, self.VARIANCE_FACTOR, self.WINDOW_DF, self.rule.archive_df_share)


def interval_guard(procedure: Procedure, rule: RuleSpec, table: CellTable, metric: str) -> GuardResult:
    """A guard judged on its own interval (at ``guard_confidence``, else ``confidence``): it fails when
    the whole interval lies below -tolerance."""
    try:
        estimate = procedure.estimate(table, metric, rule.guard_confidence or rule.confidence)
    except ValueError as exc:  # e.g. a control with no speculation has accepted_per_round = 0
        return GuardResult(metric=metric, failed=None, detail=str(exc))
    tolerance = rule.guard_tolerance_pct or 0.0
    failed = estimate.ci_high_pct < -tolerance
    detail = (
        f"{metric} {estimate.point_pct:+.2f} % [{estimate.ci_low_pct:+.2f}, {estimate.ci_high_pct:+.2f}] "
        f"({level_text(estimate.confidence)}); fails when the whole interval is below -{tolerance:g} %"
    )
    return GuardResult(metric=metric, failed=failed, detail=detail, estimate=estimate)
