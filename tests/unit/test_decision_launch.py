"""win2-launch-v1: the launch as a unit of variance, NO-CHANGE, interval guards, random order."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fairwin.decision import WIN2_LAUNCH_V1, ArchiveNoise, DecisionRow, WindowContext, decide_cell

METRICS = ("pooled_rate_tps", "accepted_per_round", "decode_tps", "ms_per_round", "ttft_s")


def rows(
    s1: list[float],
    s2: list[float],
    s3: list[float],
    kinds: dict[str, str] | None = None,
    **series: dict[str, list[float]],
) -> list[DecisionRow]:
    out = []
    for start, values in (("s1", s1), ("s2", s2), ("s3", s3)):
        for r, v in enumerate(values, 1):
            fields: dict[str, Any] = {m: v for m in METRICS}
            for metric, per_start in series.items():
                fields[metric] = per_start[start][r - 1]
            out.append(DecisionRow(start=start, cell="c", repeat=r, kind=(kinds or {}).get(start), **fields))
    return out


def archive(cv: float, starts: int, metrics: tuple[str, ...] = ("pooled_rate_tps",)) -> list[ArchiveNoise]:
    return [
        ArchiveNoise(
            metric=m, cell="c", starts=starts, windows=starts, launch_cv_pct=cv, repeat_cv_pct=0.5, range_pct=None
        )
        for m in metrics
    ]


def decide(data: list[DecisionRow], **kw: Any):  # type: ignore[no-untyped-def]
    context = WindowContext(window_id="w", mode="m", cells=["c"], **kw)
    return decide_cell(data, "c", WIN2_LAUNCH_V1, context)


S1, S2, S3 = [100.0, 101.0, 99.0], [106.0, 107.0, 105.0], [102.0, 103.0, 101.0]


def test_window_alone_has_one_degree_of_freedom() -> None:
    # tau^2 = max((100 - 102)^2 / 2, within-launch var / n) = max(2, 1/3) = 2; SE = sqrt(1.5 * 2).
    cell = decide(rows(S1, S2, S3))
    est = cell.primary.estimate  # type: ignore[union-attr]
    assert est.method == "two-level" and est.df == 1
    half = stats.t.ppf(0.975, 1) * math.sqrt(3.0)
    assert est.point_pct == pytest.approx(500 / 101)
    assert est.ci_low_pct == pytest.approx((5 - half) * 100 / 101)
    assert est.ci_high_pct == pytest.approx((5 + half) * 100 / 101)
    assert cell.verdict == "NEUTRAL"  # +5 % on repeats alone is not a win: the launch pair disagrees by 2 %


def test_the_archive_adds_degrees_of_freedom_by_hand() -> None:
    cell = decide(rows(S1, S2, S3), archive=archive(cv=1.0, starts=11))
    est = cell.primary.estimate  # type: ignore[union-attr]
    tau2 = (1 * 2.0 + 10 * (0.01 * 101) ** 2) / 11
    half = stats.t.ppf(0.975, 11) * math.sqrt(1.5 * tau2)
    assert est.df == 11
    assert est.ci_low_pct == pytest.approx((5 - half) * 100 / 101)
    assert est.ci_high_pct == pytest.approx((5 + half) * 100 / 101)
    assert cell.verdict == "WIN"


def test_within_launch_variance_is_only_a_floor() -> None:
    # Identical bracketing launches: the pair says 0, so tau^2 falls to the within-launch variance over n
    # (each start's repeats deviate by [0, 0.01, -0.01]: variance 1e-4 on 6 degrees of freedom), still on
    # one degree of freedom: the t multiplier stays 12.7.
    flat = [100.0, 100.01, 99.99]
    cell = decide(rows(flat, [101.5, 101.51, 101.49], flat))
    est = cell.primary.estimate  # type: ignore[union-attr]
    half = stats.t.ppf(0.975, 1) * math.sqrt(1.5 * 1e-4 / 3)
    assert est.df == 1
    assert est.ci_high_pct - est.point_pct == pytest.approx(half * 100 / 100.0, rel=1e-6)


def test_no_change_when_the_90_percent_interval_lies_within_the_bar() -> None:
    same = [100.0, 100.2, 99.8]
    cell = decide(rows(same, [100.1, 100.3, 99.9], same), archive=archive(cv=0.3, starts=21))
    est = cell.primary.estimate  # type: ignore[union-attr]
    assert est.equivalence_confidence == 0.90
    assert -2 < est.equivalence_low_pct < est.equivalence_high_pct < 2  # type: ignore[operator]
    assert cell.verdict == "NO-CHANGE"
    noisy = decide(rows(same, [100.1, 100.3, 99.9], same), archive=archive(cv=3.0, starts=21))
    assert noisy.verdict == "NEUTRAL"  # same point, too much launch noise to claim equivalence


def test_guards_fail_only_when_their_interval_is_wholly_below_the_tolerance() -> None:
    guards = ("pooled_rate_tps", "accepted_per_round", "decode_tps")
    base = {"s1": [2.0, 2.01, 1.99], "s3": [2.0, 2.01, 1.99]}
    much_worse = rows(S1, S2, S3, accepted_per_round={**base, "s2": [1.8, 1.81, 1.79]})
    cell = decide(much_worse, archive=archive(cv=1.0, starts=11, metrics=guards))
    guard = {g.metric: g for g in cell.guards}
    assert guard["accepted_per_round"].failed is True
    assert guard["accepted_per_round"].estimate.ci_high_pct < -3  # type: ignore[union-attr]
    assert cell.verdict == "LOSS"
    slightly = rows(S1, S2, S3, accepted_per_round={**base, "s2": [1.98, 1.99, 1.97]})
    cell = decide(slightly, archive=archive(cv=1.0, starts=11, metrics=guards))
    assert {g.metric: g.failed for g in cell.guards}["accepted_per_round"] is False
    assert cell.verdict == "WIN"


def test_a_guard_with_a_zero_control_is_not_judged() -> None:
    zero = {"s1": [0.0, 0.0, 0.0], "s2": [3.9, 3.9, 3.9], "s3": [0.0, 0.0, 0.0]}
    cell = decide(rows(S1, S2, S3, accepted_per_round=zero), archive=archive(cv=1.0, starts=11))
    guard = {g.metric: g for g in cell.guards}["accepted_per_round"]
    assert guard.failed is None and "a percentage needs a positive control" in guard.detail
    assert cell.verdict == "WIN"


def test_candidate_first_order_swaps_the_pairing() -> None:
    kinds = {"s1": "candidate", "s2": "control", "s3": "candidate"}
    # The candidate brackets: mean(s1, s3) = [106, 107, 105]; the control is s2 = [101, 102, 100].
    data = rows([105.0, 106.0, 104.0], [101.0, 102.0, 100.0], [107.0, 108.0, 106.0], kinds=kinds)
    cell = decide(data, archive=archive(cv=1.0, starts=11))
    est = cell.primary.estimate  # type: ignore[union-attr]
    assert est.control == [101.0, 102.0, 100.0]
    assert est.candidate == [106.0, 107.0, 105.0]
    assert est.point_pct == pytest.approx(500 / 101)
    assert cell.verdict == "WIN"


def test_rule_is_registered_apart_from_win2_v1() -> None:
    from fairwin.decision import RULES, WIN2_V1

    assert set(RULES) == {
        "win2-v1",
        "win2-launch-v1",
        "win2-alt7-v1",
        "win2-alt7-client-v1",
        "win2-seq-v1",
        "win2-seq-v2",
        "win-arms-v1",
    }
    assert WIN2_LAUNCH_V1.sha256 != WIN2_V1.sha256
    assert (WIN2_LAUNCH_V1.order, WIN2_LAUNCH_V1.equivalence_confidence) == ("random", 0.90)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(80, 120), min_size=9, max_size=9),
    st.floats(0.1, 5.0),
    st.integers(2, 40),
)
def test_intervals_are_nested_around_the_point(values: list[float], cv: float, starts: int) -> None:
    cell = decide(rows(values[0:3], values[3:6], values[6:9]), archive=archive(cv=cv, starts=starts))
    est = cell.primary.estimate  # type: ignore[union-attr]
    assert est.ci_low_pct <= est.equivalence_low_pct <= est.point_pct  # type: ignore[operator]
    assert est.point_pct <= est.equivalence_high_pct <= est.ci_high_pct  # type: ignore[operator]
    assert est.df == starts  # 1 from the window + (starts - 1) from the archive
    assert cell.verdict in ("WIN", "LOSS", "NEUTRAL", "NO-CHANGE")
    if cell.verdict == "NO-CHANGE":
        assert est.equivalence_low_pct > -2 and est.equivalence_high_pct < 2  # type: ignore[operator]
