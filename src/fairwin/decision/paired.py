"""Estimates of the candidate's effect and the verdict they imply. Pure: numbers in, numbers out."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

Verdict = Literal["WIN", "LOSS", "NEUTRAL", "NO-CHANGE", "INCONCLUSIVE"]


@functools.lru_cache(maxsize=1024)
def t_quantile(q: float, df: float) -> float:
    """Student's t quantile, remembered: an audit asks for the same few thousands of times.

    ``scipy.special.stdtrit`` is what ``scipy.stats.t.ppf`` computes (bit for bit), without importing
    ``scipy.stats``, which is most of ``fairwin decide``'s start-up time; ``scipy.special`` itself is imported at
    the first quantile, not by every command that imports the decision's types (a tenth of a second each).
    """
    from scipy import special

    return float(special.stdtrit(df, q))


class Estimate(BaseModel):
    """The candidate's effect on one metric, as % of the control mean, with its interval."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str
    method: Literal["paired-t", "two-level", "alternating", "arms"]
    n: int
    control: list[float]
    candidate: list[float]
    deltas: list[float]
    control_mean: float
    candidate_mean: float
    point_pct: float
    ci_low_pct: float
    ci_high_pct: float
    confidence: float
    df: float
    equivalence_low_pct: float | None = None
    equivalence_high_pct: float | None = None
    equivalence_confidence: float | None = None
    launch_cv_pct: float | None = None  # two-level, alternating: one launch's s.d. as used, % of the control mean


def check_control(metric: str, control: np.ndarray, candidate: np.ndarray) -> float:
    """The control mean, which every percentage divides by; refuses what has no percentage."""
    if len(control) != len(candidate) or len(control) < 2:
        raise ValueError(f"{metric}: an interval needs >= 2 complete repeats")
    control_mean = float(control.mean())
    if control_mean <= 0 or not math.isfinite(control_mean):
        raise ValueError(f"{metric}: control mean is {control_mean}; a percentage needs a positive control")
    return control_mean


def make_estimate(
    metric: str,
    method: Literal["paired-t", "two-level", "alternating"],
    control: np.ndarray,
    candidate: np.ndarray,
    interval: tuple[float, float],
    confidence: float,
    df: float,
    equivalence: tuple[float, float, float] | None = None,
    launch_sd: float | None = None,
) -> Estimate:
    """An Estimate from per-repeat values and intervals of mean(d) in the metric's own units.

    ``equivalence`` is (low, high, level) of a second, narrower interval, when the rule has one;
    ``launch_sd`` one launch's standard deviation in the metric's units, when the procedure models it.
    """
    control_mean = check_control(metric, control, candidate)
    deltas = candidate - control
    scale = 100.0 / control_mean
    eq_low, eq_high, eq_level = equivalence if equivalence is not None else (None, None, None)
    return Estimate(
        metric=metric,
        method=method,
        n=len(deltas),
        control=control.tolist(),
        candidate=candidate.tolist(),
        deltas=deltas.tolist(),
        control_mean=control_mean,
        candidate_mean=float(candidate.mean()),
        point_pct=float(deltas.mean()) * scale,
        ci_low_pct=interval[0] * scale,
        ci_high_pct=interval[1] * scale,
        confidence=confidence,
        df=df,
        equivalence_low_pct=None if eq_low is None else eq_low * scale,
        equivalence_high_pct=None if eq_high is None else eq_high * scale,
        equivalence_confidence=eq_level,
        launch_cv_pct=None if launch_sd is None else launch_sd * scale,
    )


def _paired_interval(deltas: np.ndarray[Any, np.dtype[np.float64]], confidence: float) -> tuple[float, float]:
    """``scipy.stats.ttest_rel(candidate, control).confidence_interval(confidence)``, computed as scipy computes it
    (the mean, the variance as the second central moment times n / (n - 1), the t quantiles from ``stdtrit``), so
    the bounds are the same to the last bit (tests/unit/test_decision.py holds them to it), without importing
    ``scipy.stats``: half a second of every window's decide step."""
    n = len(deltas)
    mean = np.mean(deltas)
    variance = np.mean((deltas - np.mean(deltas, keepdims=True)) ** 2) * (n / (n - 1))
    se = np.sqrt(variance / n)
    tail = (1 - confidence) / 2
    return t_quantile(tail, n - 1) * float(se) + float(mean), t_quantile(1 - tail, n - 1) * float(se) + float(mean)


def paired_t(metric: str, control: Sequence[float], candidate: Sequence[float], confidence: float) -> Estimate:
    """The paired-t interval of mean(candidate - control) on n - 1 degrees of freedom (scipy)."""
    ctl, cand = np.asarray(control, dtype=float), np.asarray(candidate, dtype=float)
    check_control(metric, ctl, cand)
    deltas = cand - ctl
    if float(np.ptp(deltas)) == 0.0:
        # Identical differences: the interval collapses onto the point (scipy would return NaN).
        low = high = float(deltas[0])
    else:
        low, high = _paired_interval(deltas, confidence)
    return make_estimate(metric, "paired-t", ctl, cand, (low, high), confidence, len(deltas) - 1)


def verdict_for(estimate: Estimate, bar_pct: float, higher_is_better: bool) -> Verdict:
    """WIN beyond +bar with the interval excluding 0; LOSS mirrored; NO-CHANGE when an
    equivalence interval was computed and lies within +-bar; NEUTRAL otherwise."""
    sign = 1.0 if higher_is_better else -1.0
    point = sign * estimate.point_pct
    low, high = sorted((sign * estimate.ci_low_pct, sign * estimate.ci_high_pct))
    if point > bar_pct and low > 0:
        return "WIN"
    if point < -bar_pct and high < 0:
        return "LOSS"
    eq_low, eq_high = estimate.equivalence_low_pct, estimate.equivalence_high_pct
    if eq_low is not None and eq_high is not None and -bar_pct < eq_low and eq_high < bar_pct:
        return "NO-CHANGE"
    return "NEUTRAL"


def direction_pct(estimate: Estimate, higher_is_better: bool) -> tuple[float, float, float]:
    """(point, low, high) with the sign turned so that positive is always better."""
    sign = 1.0 if higher_is_better else -1.0
    low, high = sorted((sign * estimate.ci_low_pct, sign * estimate.ci_high_pct))
    return sign * estimate.point_pct, low, high
