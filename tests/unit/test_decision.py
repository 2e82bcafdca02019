from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fairwin.decision import WIN2_V1, decide, paired_estimate, verdict_for
from fairwin.metrics.pool import PooledRow


def row(start: str, repeat: int, rate: float | None, cell: str = "c") -> PooledRow:
    return PooledRow(
        window_id="w",
        start=start,
        role={"s2": "B"}.get(start, "A"),
        cell=cell,
        repeat=repeat,
        waves=2,
        streams=4,
        generation_tokens=100,
        first_tokens=4,
        accepted_tokens=0,
        drafts=0,
        draft_tokens=0,
        decode_steps=96,
        rounds=96,
        decode_s=1.0,
        prefix_cache_hits=0,
        pooled_rate_tps=rate if rate is not None else math.nan,
        accepted_per_round=0,
        ms_per_round=10,
        client_decode_tokens=90,
        client_decode_s=1.0,
        ttft_s=0.1,
        decode_tps=90,
    )


def rows_for(s1: list[float], s2: list[float], s3: list[float], cell: str = "c") -> list[PooledRow]:
    out = []
    for start, values in (("s1", s1), ("s2", s2), ("s3", s3)):
        out += [row(start, r, v, cell) for r, v in enumerate(values, 1)]
    return out


def test_hand_computed_vector() -> None:
    # control = [100, 100, 100]; candidate = [104, 105, 106]; d = [4, 5, 6]
    est = paired_estimate("m", [99, 100, 101], [104, 105, 106], [101, 100, 99], 0.95)
    assert est.control == [100, 100, 100]
    assert est.deltas == [4, 5, 6]
    assert est.point_pct == pytest.approx(5.0)
    half = stats.t.ppf(0.975, 2) * 1.0 / math.sqrt(3)  # sd(d) = 1
    assert est.ci_low_pct == pytest.approx(5.0 - half)
    assert est.ci_high_pct == pytest.approx(5.0 + half)
    assert verdict_for(est, 2.0, True) == "WIN"
    assert verdict_for(est, 2.0, False) == "LOSS"  # lower-is-better reading of the same numbers


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(50, 150), min_size=2, max_size=6).flatmap(
        lambda s1: st.tuples(
            st.just(s1),
            st.lists(st.floats(50, 150), min_size=len(s1), max_size=len(s1)),
            st.lists(st.floats(50, 150), min_size=len(s1), max_size=len(s1)),
        )
    )
)
def test_interval_matches_scipy_ttest_rel(series: tuple[list[float], list[float], list[float]]) -> None:
    s1, s2, s3 = series
    control = (np.asarray(s1) + np.asarray(s3)) / 2
    d = np.asarray(s2) - control
    est = paired_estimate("m", s1, s2, s3, 0.95)
    if np.ptp(d) == 0:
        assert est.ci_low_pct == est.ci_high_pct == pytest.approx(est.point_pct)
        return
    ci = stats.ttest_rel(s2, control).confidence_interval(0.95)
    scale = 100 / control.mean()
    assert est.ci_low_pct == pytest.approx(ci.low * scale, rel=1e-9, abs=1e-9)
    assert est.ci_high_pct == pytest.approx(ci.high * scale, rel=1e-9, abs=1e-9)
    assert est.ci_low_pct <= est.point_pct <= est.ci_high_pct


@pytest.mark.parametrize(
    ("s2", "verdict"),
    [
        ([103.0, 103.1, 102.9], "WIN"),  # +3 %, tight
        ([101.5, 101.6, 101.4], "NEUTRAL"),  # significant but under the bar
        ([110.0, 90.0, 106.0], "NEUTRAL"),  # above the bar on average, interval spans 0
        ([97.0, 96.9, 97.1], "LOSS"),
    ],
)
def test_cell_verdict_branches(s2: list[float], verdict: str) -> None:
    decision = decide(
        rows_for([100, 100, 100], s2, [100, 100, 100]),
        window_id="w",
        mode="controlled",
        rule=WIN2_V1,
        decision_cells={"c": True},
    )
    assert decision.cells[0].verdict == verdict
    assert decision.verdict == verdict


def test_missing_repeat_or_metric_is_inconclusive() -> None:
    rows = rows_for([100, 100, 100], [103, 103, 103], [100, 100])
    cell = decide(rows, window_id="w", mode="m", rule=WIN2_V1, decision_cells={"c": True}).cells[0]
    assert cell.verdict == "INCONCLUSIVE"
    assert "repeats [3] are missing from some start" in cell.reasons
    rows = rows_for([100, 100, 100], [103, None, 103], [100, 100, 100])  # type: ignore[list-item]
    cell = decide(rows, window_id="w", mode="m", rule=WIN2_V1, decision_cells={"c": True}).cells[0]
    assert cell.verdict == "INCONCLUSIVE"
    assert "pooled_rate_tps is missing in some repeat" in cell.reasons


def test_window_verdict_aggregation_and_reported_cells() -> None:
    win = rows_for([100] * 3, [105, 105.1, 104.9], [100] * 3, "a")
    neutral = rows_for([100] * 3, [100, 100.1, 99.9], [100] * 3, "b")
    loss = rows_for([100] * 3, [90, 90.1, 89.9], [100] * 3, "b")
    both = decide(win + neutral, window_id="w", mode="m", rule=WIN2_V1, decision_cells={"a": True, "b": True})
    assert both.verdict == "NEUTRAL"
    reported = decide(win + loss, window_id="w", mode="m", rule=WIN2_V1, decision_cells={"a": True, "b": False})
    assert reported.verdict == "WIN"  # a reported-only cell never decides
    assert reported.cells[1].verdict == "LOSS"
    deciding = decide(win + loss, window_id="w", mode="m", rule=WIN2_V1, decision_cells={"a": True, "b": True})
    assert deciding.verdict == "LOSS"


def test_decision_records_rule_and_its_sha() -> None:
    decision = decide(
        rows_for([100] * 3, [100] * 3, [100] * 3), window_id="w", mode="m", rule=WIN2_V1, decision_cells={"c": True}
    )
    assert decision.rule_id == "win2-v1"
    assert decision.rule.bar_pct == 2.0 and decision.rule.confidence == 0.95
    assert decision.rule_sha256 == WIN2_V1.sha256
    assert WIN2_V1.model_copy(update={"bar_pct": 3.0}).sha256 != WIN2_V1.sha256
