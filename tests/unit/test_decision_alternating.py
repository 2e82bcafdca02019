"""win2-alt7-v1: seven alternating starts, a linear drift fitted away, the launch variance from the residuals."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from fairwin.decision import (
    RULES,
    WIN2_ALT7_V1,
    WIN2_LAUNCH_V1,
    WIN2_V1,
    ArchiveNoise,
    DecisionRow,
    RuleSpec,
    WindowContext,
    audit,
    decide_cell,
    get_rule,
)
from fairwin.rows import order_kinds

METRICS = ("pooled_rate_tps", "accepted_per_round", "decode_tps", "ms_per_round", "ttft_s")


def rows(per_start: list[list[float]], order: str = "control-first", **series: list[list[float]]) -> list[DecisionRow]:
    """One row per start and repeat; every metric takes ``per_start`` unless ``series`` names it."""
    kinds = order_kinds(order, len(per_start))
    out = []
    for (start, kind), values in zip(kinds.items(), per_start, strict=True):
        index = int(start[1:]) - 1
        for repeat, value in enumerate(values, 1):
            fields: dict[str, Any] = dict.fromkeys(METRICS, value)
            for metric, table in series.items():
                fields[metric] = table[index][repeat - 1]
            out.append(DecisionRow(start=start, kind=kind, cell="c", repeat=repeat, **fields))
    return out


def decide(data: list[DecisionRow], rule: RuleSpec = WIN2_ALT7_V1, **kw: Any):  # type: ignore[no-untyped-def]
    return decide_cell(data, "c", rule, WindowContext(window_id="w", mode="m", cells=["c"], **kw))


# Seven starts, control-first: s1 s3 s5 s7 control, s2 s4 s6 candidate; two repeats each.
MEANS = [100.0, 108.0, 97.0, 111.0, 103.0, 104.0, 99.0]
SPREAD = 0.5  # each start's two repeats are mean -+ 0.5


def two_repeats(means: list[float]) -> list[list[float]]:
    return [[m - SPREAD, m + SPREAD] for m in means]


def test_interval_by_hand() -> None:
    est = decide(rows(two_repeats(MEANS))).primary.estimate
    # By hand, on the log scale: with the positions centred (-3..3), the drift column and the candidate
    # column are orthogonal, so each coefficient is its own projection.
    y = np.log(MEANS)
    position = np.arange(7) - 3.0
    candidate = np.array([0, 1, 0, 1, 0, 1, 0], dtype=float)
    delta = y[candidate == 1].mean() - y[candidate == 0].mean()
    slope = (position * y).sum() / (position**2).sum()
    fitted = y.mean() + slope * position + delta * (candidate - candidate.mean())
    tau2 = ((y - fitted) ** 2).sum() / 4  # 7 starts - 3 parameters
    half = stats.t.ppf(0.975, 4) * math.sqrt(tau2 * (1 / 4 + 1 / 3))
    assert est.method == "alternating" and est.df == 4 and est.n == 2
    assert est.point_pct == pytest.approx(100 * math.expm1(delta))
    assert est.ci_low_pct == pytest.approx(100 * math.expm1(delta - half))
    assert est.ci_high_pct == pytest.approx(100 * math.expm1(delta + half))
    assert est.launch_cv_pct == pytest.approx(100 * math.sqrt(tau2))
    assert est.control_mean == pytest.approx(np.mean(MEANS[::2]))


def test_a_drift_cancels_and_leaves_no_change() -> None:
    # Nothing changed, and the level falls 5 % a start: the kinds' mean positions coincide.
    falling = [100.0 * 0.95**i for i in range(7)]
    cell = decide(rows(two_repeats(falling)))
    est = cell.primary.estimate
    assert est.point_pct == pytest.approx(0.0, abs=1e-9)
    # The residuals are 0, so tau^2 is its floor: the repeats' variance (of logs) over 2 repeats.
    floor = np.mean([np.var(np.log([m - SPREAD, m + SPREAD]), ddof=1) for m in falling]) / 2
    assert est.launch_cv_pct == pytest.approx(100 * math.sqrt(floor))
    assert cell.verdict == "NO-CHANGE"


def test_an_effect_under_drift_wins_at_its_size() -> None:
    noise = [1.004, 0.997, 1.001, 0.995, 1.002, 1.003, 0.998]
    means = [100.0 * 0.96**i * noise[i] * (1.10 if i % 2 else 1.0) for i in range(7)]
    cell = decide(rows(two_repeats(means)))
    est = cell.primary.estimate
    assert cell.verdict == "WIN"
    assert est.point_pct == pytest.approx(10.0, abs=1.0) and est.ci_low_pct > 0


def test_candidate_first_puts_the_candidate_on_the_outer_starts() -> None:
    # The same numbers read candidate-first: the outer starts (97, 111 ... ) are now the candidate.
    forward = decide(rows(two_repeats(MEANS))).primary.estimate
    backward = decide(rows(two_repeats(MEANS), order="candidate-first"), order="candidate-first").primary.estimate
    assert backward.control_mean == pytest.approx(forward.candidate_mean)
    assert backward.candidate_mean == pytest.approx(forward.control_mean)


def test_a_guard_fails_only_on_its_own_wide_interval() -> None:
    flat = two_repeats([100.0, 101.0, 99.5, 100.5, 100.0, 100.8, 99.8])
    slower = [[v * (0.8 if i % 2 else 1.0) for v in start] for i, start in enumerate(flat)]
    cell = decide(rows(flat, decode_tps=slower))
    (decode,) = [g for g in cell.guards if g.metric == "decode_tps"]
    assert decode.failed is True and decode.estimate is not None and decode.estimate.confidence == 0.99
    assert cell.verdict == "LOSS"
    assert next(g for g in cell.guards if g.metric == "accepted_per_round").failed is False


def test_the_archive_adds_degrees_of_freedom() -> None:
    noise = [
        ArchiveNoise(
            metric="pooled_rate_tps",
            cell="c",
            starts=11,
            windows=3,
            launch_cv_pct=2.0,
            repeat_cv_pct=0.5,
            range_pct=None,
        )
    ]
    est = decide(rows(two_repeats(MEANS)), archive=noise).primary.estimate
    assert est.df == 4 + 10


def test_rows_of_a_bracket_are_refused_with_the_count() -> None:
    cell = decide(rows(two_repeats(MEANS[:3])))
    assert cell.verdict == "INCONCLUSIVE"
    assert "start(s) s4, s5, s6, s7 have no rows" in " ".join(cell.reasons)
    seven = decide(rows(two_repeats(MEANS)), rule=WIN2_V1)
    assert seven.verdict == "INCONCLUSIVE"
    assert seven.reasons[0] == "the rows come from 7 starts (s1 to s7); the rule registers 3 per window"


def test_parameters_must_fit_the_kind() -> None:
    base = WIN2_ALT7_V1.model_dump()
    with pytest.raises(ValueError, match="odd number of starts, at least 5"):
        RuleSpec(**{**base, "starts": 6})
    with pytest.raises(ValueError, match="starts mean nothing to a rule of kind win2"):
        RuleSpec(**{**WIN2_V1.model_dump(), "starts": 5})
    # A win2 rule without its guard count once registered, and then every guard failed.
    with pytest.raises(ValueError, match="a rule of kind win2 needs guard_fail_repeats"):
        RuleSpec(**{**WIN2_V1.model_dump(), "guard_fail_repeats": None})
    with pytest.raises(ValueError, match="a rule of kind launch needs guard_tolerance_pct"):
        RuleSpec(**{**WIN2_LAUNCH_V1.model_dump(), "guard_tolerance_pct": None})
    with pytest.raises(ValueError, match="guard_fail_repeats mean nothing to a rule of kind alternating"):
        RuleSpec(**{**base, "guard_fail_repeats": 2})


def test_earlier_rules_keep_their_sha256() -> None:
    # Recorded in every window those rules decided; a new parameter must not move them.
    assert WIN2_V1.sha256 == "cc766148a94042febbd83568f80e68cf6045f83441e40a520427f1945ed5b12b"
    assert WIN2_LAUNCH_V1.sha256 == "2d604cdf07412a5eeca9e4d16ee47f098b1165ed48012f3c9bec8c9a31b26c53"
    assert WIN2_ALT7_V1.sha256 == "2c7df7998e9deca5115fdf0e38303b30ac19ce3d1508ba5ea2fe81ec4fc634b2"
    assert RULES["win2-alt7-client-v1"].sha256 == "e8c047357b4453912ef17f82dccafd0c24d0d165bef50e789336228654c3a67b"
    assert "starts" in WIN2_ALT7_V1.model_dump() and len({r.sha256 for r in RULES.values()}) == len(RULES)


def test_a_plan_naming_no_rule_gets_the_sequential_default_and_this_rule_by_name() -> None:
    assert get_rule(None).id == "win2-seq-v2" and get_rule("win2-alt7-v1") is WIN2_ALT7_V1


@pytest.mark.parametrize(("repeat_cv", "launch_cv", "drift"), [(13.0, 8.0, -8.0), (3.0, 15.0, 0.0)])
def test_audited_error_rates_hold_at_this_machines_noise(repeat_cv: float, launch_cv: float, drift: float) -> None:
    # The first: what A/A windows on the 2-core machine showed; the second, launches far apart (docs/decision.md).
    null = audit(
        WIN2_ALT7_V1, repeats=3, repeat_cv_pct=repeat_cv, launch_cv_pct=launch_cv, drift_pct=drift, trials=2000, seed=1
    )
    margin = 2 * null.mc_error
    assert null.false_win is not None and null.false_win <= 0.025 + margin
    assert null.false_loss is not None and null.false_loss <= 0.05 + margin


def test_power_at_the_demos_smallest_effect() -> None:
    found = audit(
        WIN2_ALT7_V1, repeats=3, repeat_cv_pct=13.0, launch_cv_pct=8.0, drift_pct=-8.0, effect_pct=60.0, trials=1000
    )
    assert found.power is not None and found.power >= 0.9
