"""win2-v1, exactly: hand-computed vectors and properties for every branch."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fairwin.decision import (
    WIN2_V1,
    ArchiveNoise,
    DecisionRow,
    WindowContext,
    decide,
    decide_cell,
    paired_t,
    verdict_for,
)
from fairwin.decision.paired import _paired_interval

METRICS = ("pooled_rate_tps", "accepted_per_round", "decode_tps", "ms_per_round", "ttft_s")


def rows_for(s1: list[float], s2: list[float], s3: list[float], cell: str = "c", **overrides: Any) -> list[DecisionRow]:
    """Every metric follows the primary's series unless an override gives its own (start -> values)."""
    out = []
    for start, values in (("s1", s1), ("s2", s2), ("s3", s3)):
        for r, v in enumerate(values, 1):
            fields: dict[str, Any] = {m: v for m in METRICS}
            fields["ms_per_round"] = fields["ttft_s"] = 100.0  # neutral unless overridden
            for metric, per_start in overrides.items():
                if start in per_start:
                    fields[metric] = per_start[start][r - 1]
            out.append(DecisionRow(start=start, cell=cell, repeat=r, **fields))
    return out


def ctx(cells: dict[str, bool] | None = None, **kw: Any) -> WindowContext:
    cells = cells or {"c": True}
    reported = [name for name, decides in cells.items() if not decides]
    return WindowContext(window_id="w", mode="controlled", cells=list(cells), reported=reported, **kw)


def one(rows: list[DecisionRow], **kw: Any):  # type: ignore[no-untyped-def]
    return decide_cell(rows, "c", WIN2_V1, ctx(**kw))


FLAT = [100.0, 100.0, 100.0]


def test_hand_computed_vector() -> None:
    # control = mean(s1, s3) = [100, 100, 100]; candidate = [104, 105, 106]; d = [4, 5, 6]; sd(d) = 1.
    est = paired_t("m", [100, 100, 100], [104, 105, 106], 0.95)
    assert est.deltas == [4, 5, 6]
    assert est.point_pct == pytest.approx(5.0)
    half = stats.t.ppf(0.975, 2) * 1.0 / math.sqrt(3)
    assert (est.ci_low_pct, est.ci_high_pct) == (pytest.approx(5.0 - half), pytest.approx(5.0 + half))
    assert est.df == 2
    cell = one(rows_for([99, 100, 101], [104, 105, 106], [101, 100, 99]))
    assert cell.primary is not None and cell.primary.estimate is not None
    assert cell.primary.estimate.control == [100, 100, 100]
    assert cell.verdict == "WIN"


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
    cell = one(rows_for(s1, s2, s3))
    assert cell.primary is not None and cell.primary.estimate is not None
    est = cell.primary.estimate
    control = (np.asarray(s1) + np.asarray(s3)) / 2
    d = np.asarray(s2) - control
    if np.ptp(d) == 0:
        assert est.ci_low_pct == est.ci_high_pct == pytest.approx(est.point_pct)
        return
    ci = stats.ttest_rel(s2, control).confidence_interval(0.95)
    scale = 100 / control.mean()
    assert est.ci_low_pct == pytest.approx(ci.low * scale, rel=1e-9, abs=1e-9)
    assert est.ci_high_pct == pytest.approx(ci.high * scale, rel=1e-9, abs=1e-9)
    assert est.ci_low_pct <= est.point_pct <= est.ci_high_pct


@settings(max_examples=300, deadline=None)
@given(
    st.integers(2, 12).flatmap(
        lambda n: st.tuples(
            st.lists(st.floats(1, 1e4), min_size=n, max_size=n),
            st.lists(st.floats(1, 1e4), min_size=n, max_size=n),
            st.sampled_from([0.9, 0.95, 0.98, 0.99, 1 - 2 * 0.009014]),
        )
    )
)
def test_the_paired_interval_is_scipys_to_the_last_bit(case: tuple[list[float], list[float], float]) -> None:
    # fairwin computes ttest_rel's interval itself (importing scipy.stats cost half a second a window): the bounds
    # must be scipy's exactly, so no stored decision moves.
    control, candidate, confidence = case
    d = np.asarray(candidate) - np.asarray(control)
    if np.ptp(d) == 0:
        return
    ci = stats.ttest_rel(candidate, control).confidence_interval(confidence)
    assert _paired_interval(d, confidence) == (float(ci.low), float(ci.high))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(80, 120), min_size=3, max_size=3), st.floats(-20, 20))
def test_swapping_sides_mirrors_the_verdict(base: list[float], effect: float) -> None:
    candidate = [b * (1 + effect / 100) + i * 0.01 for i, b in enumerate(base)]
    up = paired_t("m", base, candidate, 0.95)
    mirror = {"WIN": "LOSS", "LOSS": "WIN", "NEUTRAL": "NEUTRAL"}
    assert verdict_for(up, 2.0, higher_is_better=False) == mirror[verdict_for(up, 2.0, higher_is_better=True)]


@pytest.mark.parametrize(
    ("s2", "verdict"),
    [
        ([103.0, 103.1, 102.9], "WIN"),  # +3 %, tight
        ([101.5, 101.6, 101.4], "NEUTRAL"),  # significant but under the bar
        ([110.0, 90.0, 106.0], "NEUTRAL"),  # above the bar on average, interval spans 0
        ([97.0, 96.9, 97.1], "LOSS"),
    ],
)
def test_primary_branches(s2: list[float], verdict: str) -> None:
    # Guards pass whatever the primary does: give them an unchanged candidate.
    guards = {m: {"s2": [100.0, 100.0, 100.0]} for m in ("accepted_per_round", "decode_tps")}
    cell = one(rows_for(FLAT, s2, FLAT, **guards))
    assert cell.verdict == verdict, cell.reasons


def test_guard_fails_in_two_of_three_repeats_and_makes_a_win_a_loss() -> None:
    rows = rows_for(
        FLAT,
        [105.0, 105.1, 104.9],
        FLAT,
        accepted_per_round={"s1": [2.0, 2.0, 2.0], "s2": [1.9, 1.9, 2.1], "s3": [2.1, 2.0, 2.0]},
        decode_tps={"s2": [100.0, 100.0, 100.0]},
    )
    cell = one(rows)
    assert cell.primary is not None and cell.primary.verdict == "WIN"
    guard = {g.metric: g for g in cell.guards}
    assert guard["accepted_per_round"].failed and guard["accepted_per_round"].repeats_below == [1, 2]
    assert guard["decode_tps"].failed is False
    assert cell.verdict == "LOSS"
    assert any("guard accepted_per_round FAILED" in r for r in cell.reasons)


def test_guard_below_in_one_repeat_or_within_the_spread_passes() -> None:
    rows = rows_for(
        FLAT,
        [105.0, 105.1, 104.9],
        FLAT,
        # repeat 1 below both; repeat 2 between the controls (not below both): one failure only.
        accepted_per_round={"s1": [2.0, 1.8, 2.0], "s2": [1.9, 1.9, 2.1], "s3": [2.1, 2.0, 2.0]},
        decode_tps={"s2": [100.0, 100.0, 100.0]},
    )
    cell = one(rows)
    assert [g.failed for g in cell.guards] == [False, False]
    assert cell.verdict == "WIN"


def test_reported_metrics_get_their_own_reversed_verdict_and_never_decide() -> None:
    guards = {m: {"s2": FLAT} for m in ("accepted_per_round", "decode_tps")}
    rows = rows_for(FLAT, [105.0, 105.1, 104.9], FLAT, ttft_s={"s2": [80.0, 80.5, 79.5]}, **guards)
    cell = one(rows)
    reported = {r.metric: r for r in cell.reported}
    assert reported["ttft_s"].verdict == "WIN"  # lower is better: 20 % less TTFT
    assert reported["ttft_s"].higher_is_better is False
    assert reported["ms_per_round"].verdict == "NEUTRAL"
    worse = rows_for(FLAT, [105.0, 105.1, 104.9], FLAT, ttft_s={"s2": [150.0, 151.0, 149.0]}, **guards)
    cell = one(worse)
    assert {r.metric: r.verdict for r in cell.reported}["ttft_s"] == "LOSS"
    assert cell.verdict == "WIN"  # a reported LOSS never decides


def test_checklist_literal_records_what_ms_per_round_would_have_said() -> None:
    # The runbook's case: the candidate spends ms per round (+10 %) to buy accepted tokens; the rate wins.
    guards = {m: {"s2": FLAT} for m in ("accepted_per_round", "decode_tps")}
    rows = rows_for(FLAT, [106.0, 106.2, 105.8], FLAT, ms_per_round={"s2": [110.0, 110.2, 109.8]}, **guards)
    cell = one(rows)
    assert cell.verdict == "WIN"
    assert cell.checklist_literal is not None
    assert cell.checklist_literal.metric == "ms_per_round"
    assert cell.checklist_literal.verdict == "LOSS"


@pytest.mark.parametrize(
    ("caps", "thermal", "production", "condition"),
    [
        ({"s1": 2300, "s2": 2150, "s3": 2300}, None, None, "different clock caps"),
        ({"s1": 2150, "s2": 2150, "s3": 2150}, None, 2300, "differs from production's 2300 MHz"),
        ({"s1": 2300, "s2": 2300, "s3": 2300}, {"s2": 1}, 2300, "dialled back inside the window"),
        (None, None, 2300, "no start's cap was observed"),
        ({"s1": 2300, "s2": None, "s3": 2300}, None, None, "clock cap missing"),
    ],
)
def test_validity_makes_a_win_inconclusive_and_says_why(
    caps: dict[str, float | None] | None, thermal: dict[str, int] | None, production: float | None, condition: str
) -> None:
    rows = []
    for row in rows_for(FLAT, [105.0, 105.1, 104.9], FLAT):
        update: dict[str, Any] = {}
        if caps is not None:
            update["clock_cap_mhz"] = caps[row.start]
        update["thermal_events"] = (thermal or {}).get(row.start, 0) if row.repeat == 1 else 0
        rows.append(row.model_copy(update=update))
    cell = decide_cell(rows, "c", WIN2_V1, ctx(production_clock_cap_mhz=production))
    assert cell.verdict == "INCONCLUSIVE"
    assert any(condition in c for c in cell.reasons), cell.reasons
    assert cell.validity is not None and not cell.validity.valid


def test_same_cap_as_production_is_valid_and_unobserved_caps_without_a_production_cap_are_fine() -> None:
    rows = [r.model_copy(update={"clock_cap_mhz": 2300.0}) for r in rows_for(FLAT, [105.0, 105.1, 104.9], FLAT)]
    assert decide_cell(rows, "c", WIN2_V1, ctx(production_clock_cap_mhz=2300)).validity.valid  # type: ignore[union-attr]
    plain = one(rows_for(FLAT, [105.0, 105.1, 104.9], FLAT))
    assert plain.validity is not None and plain.validity.valid and not plain.validity.observed


def test_each_host_is_held_to_one_cap_and_its_own_configured_one_naming_the_host() -> None:
    by_host = {"here": 2300.0, "h1": 2150.0}
    rows = [r.model_copy(update={"clock_caps_by_host": by_host}) for r in rows_for(FLAT, [105.0, 105.1, 104.9], FLAT)]
    cell = decide_cell(rows, "c", WIN2_V1, ctx(production_clock_cap_mhz=2300))
    assert cell.verdict == "INCONCLUSIVE" and cell.validity is not None and cell.validity.observed
    assert "hosts ran at different clock caps (h1 at 2150 MHz, here at 2300 MHz) in s1, s2, s3" in cell.reasons
    assert "host h1 ran at 2150 MHz, its configured cap is 2300 MHz in s1, s2, s3" in cell.reasons
    same = [
        r.model_copy(update={"clock_cap_mhz": 2300.0, "clock_caps_by_host": {"here": 2300.0, "h1": 2300.0}})
        for r in rows_for(FLAT, [105.0, 105.1, 104.9], FLAT)
    ]
    configured = ctx(production_clock_cap_mhz=2300, production_caps_by_host={"here": 2300.0, "h1": 2150.0})
    cell = decide_cell(same, "c", WIN2_V1, configured)
    assert "production's configured clock cap differs between its hosts: h1 2150 MHz, here 2300 MHz" in cell.reasons
    assert "host h1 ran at 2300 MHz, its configured cap is 2150 MHz in s1, s2, s3" in cell.reasons
    assert decide_cell(same, "c", WIN2_V1, ctx(production_clock_cap_mhz=2300)).verdict == "WIN"
    alone = [
        r.model_copy(update={"clock_cap_mhz": 2150.0, "clock_caps_by_host": {"here": 2150.0}})
        for r in rows_for(FLAT, [105.0, 105.1, 104.9], FLAT)
    ]
    reasons = decide_cell(alone, "c", WIN2_V1, ctx(production_clock_cap_mhz=2300)).reasons
    assert any("cap differs from production's 2300 MHz" in r for r in reasons)
    assert not any(r.startswith("host here") for r in reasons)  # one host: said once, not twice


def test_a_dialback_between_starts_is_invalid_and_power_dialbacks_are_reported_apart() -> None:
    rows = []
    for r in rows_for(FLAT, [105.0, 105.1, 104.9], FLAT):
        power = 1 if (r.start, r.repeat) == ("s2", 1) else 0
        rows.append(r.model_copy(update={"clock_cap_mhz": 2300.0, "thermal_events": 0, "power_events": power}))
    cell = decide_cell(rows, "c", WIN2_V1, ctx(production_clock_cap_mhz=2300))
    assert cell.verdict == "WIN" and cell.validity is not None and cell.validity.power_events == {"s2": 1}
    between = decide_cell(
        rows, "c", WIN2_V1, ctx(production_clock_cap_mhz=2300, between_starts_dialbacks={"after s1": 2})
    )
    assert between.verdict == "INCONCLUSIVE"
    assert "the clock was dialled back between starts: {'after s1': 2} events" in between.reasons


def test_a_relock_between_starts_or_a_watchdogs_line_is_invalid_and_accepted_unseen_clocks_are_not() -> None:
    rows = [
        r.model_copy(update={"clock_cap_mhz": 2300.0, "thermal_events": 0}) for r in rows_for(FLAT, [105.0] * 3, FLAT)
    ]
    relocked = ctx(
        production_clock_cap_mhz=2300, between_starts_relocks={"before s2": ["GPU-0 2300 -> 1800 -> 2300 MHz"]}
    )
    cell = decide_cell(rows, "c", WIN2_V1, relocked)
    assert cell.verdict == "INCONCLUSIVE"
    assert "the clock cap changed between starts, before s2: GPU-0 2300 -> 1800 -> 2300 MHz" in cell.reasons
    logged = ctx(watchdog_events={"h1": ["relock 2300 -> 1800", "relock 1800 -> 2300"]})
    cell = decide_cell(rows, "c", WIN2_V1, logged)
    assert "the clock watchdog on h1 logged during the window: relock 2300 -> 1800 | relock 1800 -> 2300" in (
        cell.reasons
    )
    unseen = [r.model_copy(update={"clock_cap_mhz": None, "thermal_events": None}) for r in rows]
    declared = "the plan declares a production clock cap of 2300 MHz but no start's cap was observed"
    assert declared in decide_cell(unseen, "c", WIN2_V1, ctx(production_clock_cap_mhz=2300)).reasons
    accepted = ctx(production_clock_cap_mhz=2300, accepted_unobserved=["clocks"])
    assert decide_cell(unseen, "c", WIN2_V1, accepted).verdict == "WIN"  # decision.unobserved names it instead


def test_missing_metric_or_repeat_is_inconclusive() -> None:
    rows = rows_for(FLAT, [103, 103, 103], [100, 100])
    cell = one(rows)
    assert cell.verdict == "INCONCLUSIVE" and "repeats [3] are missing from some start" in cell.reasons
    rows = rows_for(FLAT, [103, 103, 103], FLAT, decode_tps={"s2": [100.0, None, 100.0]})
    cell = one(rows)
    assert cell.verdict == "INCONCLUSIVE"
    assert "decode_tps unobserved in s2 repeat 2; win2-v1 needs it" in cell.reasons
    assert cell.validity is not None and cell.validity.valid and cell.primary is None
    # A metric missing does not hide the clocks: a start at another cap is named beside it.
    capped = [r.model_copy(update={"clock_cap_mhz": 1755.0 if r.start == "s2" else 1980.0}) for r in rows]
    cell = one(capped)
    assert cell.verdict == "INCONCLUSIVE" and cell.validity is not None and not cell.validity.valid
    assert cell.reasons[0] == "decode_tps unobserved in s2 repeat 2; win2-v1 needs it"
    assert cell.reasons[1].startswith("starts ran at different clock caps")
    # A reported metric missing only makes that metric INCONCLUSIVE.
    rows = rows_for(
        FLAT,
        [103.0, 103.1, 102.9],
        FLAT,
        ttft_s={"s1": [None, 1.0, 1.0]},
        decode_tps={"s2": FLAT},
        accepted_per_round={"s2": FLAT},
    )
    cell = one(rows)
    assert cell.verdict == "WIN"
    assert {r.metric: r.verdict for r in cell.reported}["ttft_s"] == "INCONCLUSIVE"


def test_window_verdict_aggregation_and_reported_cells() -> None:
    guards = {m: {"s2": FLAT} for m in ("accepted_per_round", "decode_tps")}
    win = rows_for(FLAT, [105, 105.1, 104.9], FLAT, "a", **guards)
    neutral = rows_for(FLAT, [100, 100.1, 99.9], FLAT, "b", **guards)
    loss = rows_for(FLAT, [90, 90.1, 89.9], FLAT, "b", **guards)
    bad = rows_for(FLAT, [105, 105.1], FLAT, "b", **guards)
    assert decide(win + neutral, rule=WIN2_V1, context=ctx({"a": True, "b": True})).verdict == "NEUTRAL"
    reported = decide(win + loss, rule=WIN2_V1, context=ctx({"a": True, "b": False}))
    assert reported.verdict == "WIN" and reported.cells[1].verdict == "LOSS"  # a reported cell never decides
    assert decide(win + loss, rule=WIN2_V1, context=ctx({"a": True, "b": True})).verdict == "LOSS"
    both = decide(loss + rows_for(FLAT, [105, 105.1], FLAT, "a"), rule=WIN2_V1, context=ctx({"a": True, "b": True}))
    assert both.verdict == "INCONCLUSIVE"  # INCONCLUSIVE outranks LOSS
    assert decide(win + bad, rule=WIN2_V1, context=ctx({"a": True, "b": False})).verdict == "WIN"


def test_noise_next_to_the_bar() -> None:
    rows = rows_for([100.0, 101.0, 99.0], [105.0, 105.1, 104.9], [104.0, 101.0, 99.0])
    archive = ArchiveNoise(
        metric="pooled_rate_tps", cell="c", starts=12, windows=6, launch_cv_pct=3.5, repeat_cv_pct=0.4, range_pct=9.0
    )
    cell = decide_cell(rows, "c", WIN2_V1, ctx(archive=[archive]))
    assert cell.noise is not None
    assert cell.noise.off_off_spread_pct == pytest.approx([100 * 4 / 102, 0.0, 0.0])
    assert cell.noise.archive == archive
    assert any("day-to-day spread (3.50 %) is larger than the 2 % bar" in n for n in cell.noise.notes)
    assert any("disagree by up to 3.92 %" in n for n in cell.noise.notes)
    quiet = decide_cell(rows_for(FLAT, [105.0, 105.1, 104.9], FLAT), "c", WIN2_V1, ctx())
    assert quiet.noise is not None and quiet.noise.notes == [
        "no archived control starts match this cell; only the in-window spread is known"
    ]


def test_win2_refuses_a_candidate_first_window() -> None:
    rows = [
        r.model_copy(update={"kind": "candidate" if r.start != "s2" else "control"})
        for r in rows_for(FLAT, [105, 105, 105], FLAT)
    ]
    cell = one(rows)
    assert cell.verdict == "INCONCLUSIVE"
    assert "win2-v1 is registered for control-first windows" in cell.reasons[0]


def test_rule_identity() -> None:
    decision = decide(rows_for(FLAT, FLAT, FLAT), rule=WIN2_V1, context=ctx())
    assert decision.rule_id == "win2-v1" and decision.rule_sha256 == WIN2_V1.sha256
    assert (WIN2_V1.bar_pct, WIN2_V1.confidence, WIN2_V1.guard_fail_repeats) == (2.0, 0.95, 2)
    assert WIN2_V1.model_copy(update={"bar_pct": 3.0}).sha256 != WIN2_V1.sha256
    assert decision.format == "fairwin.decision/4"


def test_the_t_quantile_is_scipy_stats_own_bit_for_bit() -> None:
    # Stored decisions are compared with their recomputation exactly: the lighter import must not move a bit.
    from scipy import stats

    from fairwin.decision.paired import t_quantile

    for level in (0.80, 0.90, 0.95, 0.99):
        for df in (*range(1, 61), 1.5, 7.25, 200.0):
            assert t_quantile(0.5 + level / 2.0, df) == float(stats.t.ppf(0.5 + level / 2.0, df)), (level, df)
