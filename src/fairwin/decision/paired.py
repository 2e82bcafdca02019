"""Pairing by repeat and the paired-t verdict. Pure: rows in, numbers out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy import stats

Verdict = Literal["WIN", "LOSS", "NEUTRAL", "INCONCLUSIVE"]


class PairedEstimate(BaseModel):
    """control_r = mean(s1_r, s3_r), candidate_r = s2_r, d_r = candidate_r - control_r."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str
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


def paired_estimate(
    metric: str, s1: Sequence[float], s2: Sequence[float], s3: Sequence[float], confidence: float
) -> PairedEstimate:
    """The paired-t interval of mean(d), as % of mean(control); needs n >= 2 repeats."""
    first, candidate, last = (np.asarray(x, dtype=float) for x in (s1, s2, s3))
    if not (len(first) == len(candidate) == len(last)) or len(first) < 2:
        raise ValueError(f"{metric}: paired-t needs >= 2 complete repeats in s1, s2 and s3")
    control = (first + last) / 2.0
    deltas = candidate - control
    control_mean = float(control.mean())
    if control_mean <= 0 or not math.isfinite(control_mean):
        raise ValueError(f"{metric}: control mean is {control_mean}; a percentage needs a positive control")
    if float(np.ptp(deltas)) == 0.0:
        # Identical differences: the interval collapses onto the point (scipy would return NaN).
        low = high = float(deltas[0])
    else:
        result = stats.ttest_rel(candidate, control)
        interval = result.confidence_interval(confidence_level=confidence)
        low, high = float(interval.low), float(interval.high)
    scale = 100.0 / control_mean
    return PairedEstimate(
        metric=metric,
        n=len(deltas),
        control=control.tolist(),
        candidate=candidate.tolist(),
        deltas=deltas.tolist(),
        control_mean=control_mean,
        candidate_mean=float(candidate.mean()),
        point_pct=float(deltas.mean()) * scale,
        ci_low_pct=low * scale,
        ci_high_pct=high * scale,
        confidence=confidence,
    )


def verdict_for(estimate: PairedEstimate, bar_pct: float, higher_is_better: bool) -> Verdict:
    """WIN beyond +bar with the interval excluding 0; LOSS mirrored; NEUTRAL otherwise."""
    sign = 1.0 if higher_is_better else -1.0
    point = sign * estimate.point_pct
    low, high = sorted((sign * estimate.ci_low_pct, sign * estimate.ci_high_pct))
    if point > bar_pct and low > 0:
        return "WIN"
    if point < -bar_pct and high < 0:
        return "LOSS"
    return "NEUTRAL"
