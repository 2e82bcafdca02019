"""The audit against values known in closed form, within Monte Carlo error."""

from __future__ import annotations

import math

from fairwin.decision import WIN2_LAUNCH_V1, WIN2_V1, audit

TRIALS = 2000


def within(rate: float, expected: float, trials: int = TRIALS, sigmas: float = 4.0) -> bool:
    return abs(rate - expected) <= sigmas * math.sqrt(expected * (1 - expected) / trials)


def test_one_guard_fails_by_chance_seven_times_in_twenty_seven() -> None:
    # Three exchangeable values per repeat: P(candidate below both) = 1/3 per repeat;
    # P(at least 2 of 3) = 3 (1/3)^2 (2/3) + (1/3)^3 = 7/27.
    one_guard = WIN2_V1.model_copy(update={"id": "win2-v1-one-guard", "guards": ("accepted_per_round",)})
    result = audit(one_guard, repeat_cv_pct=1.0, trials=TRIALS, seed=7)
    assert within(result.guard_failure_rates["accepted_per_round"], 7 / 27)
    assert within(result.false_loss or 0.0, 7 / 27 + 0.0, sigmas=5)  # the primary adds almost nothing


def test_two_independent_guards_fail_together_as_the_product_says() -> None:
    result = audit(WIN2_V1, repeat_cv_pct=1.0, trials=TRIALS, seed=3)
    for rate in result.guard_failure_rates.values():
        assert within(rate, 7 / 27)
    assert within(result.false_loss or 0.0, 1 - (20 / 27) ** 2, sigmas=5)


def test_primary_false_win_is_at_most_two_and_a_half_percent() -> None:
    no_guards = WIN2_V1.model_copy(update={"id": "primary-only", "guards": ()})
    result = audit(no_guards, repeat_cv_pct=2.0, trials=TRIALS, seed=11)
    assert (result.false_win or 0.0) <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / TRIALS)
    assert result.power is None and result.false_win is not None


def test_launch_variance_breaks_win2_v1_and_not_the_launch_aware_rule() -> None:
    broken = audit(WIN2_V1, repeat_cv_pct=0.5, launch_cv_pct=3.0, trials=1500, seed=5)
    fixed = audit(WIN2_LAUNCH_V1, repeat_cv_pct=0.5, launch_cv_pct=3.0, trials=1500, seed=5, archive_starts=20)
    assert (broken.false_win or 0) > 0.08  # repeats share a launch; win2-v1 cannot see it
    assert (fixed.false_win or 0) <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / 1500)
    assert (fixed.false_loss or 0) <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / 1500)


def test_power_and_determinism() -> None:
    first = audit(
        WIN2_LAUNCH_V1, repeat_cv_pct=0.5, launch_cv_pct=0.5, effect_pct=5, trials=500, seed=1, archive_starts=20
    )
    again = audit(
        WIN2_LAUNCH_V1, repeat_cv_pct=0.5, launch_cv_pct=0.5, effect_pct=5, trials=500, seed=1, archive_starts=20
    )
    assert first == again
    assert (first.power or 0) > 0.95
    assert first.false_win is None
