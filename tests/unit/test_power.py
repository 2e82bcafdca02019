from __future__ import annotations

import math

import pytest
from scipy import stats

from fairwin.decision import WIN2_LAUNCH_V1, WIN2_V1, ArchiveNoise
from fairwin.gates.power import detectability, power_warnings


def noise(launch: float | None, repeat: float | None, starts: int = 10) -> ArchiveNoise:
    return ArchiveNoise(
        metric="pooled_rate_tps",
        cell="c",
        starts=starts,
        windows=starts // 2,
        launch_cv_pct=launch,
        repeat_cv_pct=repeat,
        range_pct=None,
    )


def test_win2_half_width_by_hand() -> None:
    found = detectability(WIN2_V1, "c", 3, noise(None, 2.0))
    assert found is not None
    se = 2.0 * math.sqrt(1.5 / 3)
    assert found.half_width_pct == pytest.approx(stats.t.ppf(0.975, 2) * se)
    assert found.mde_pct == pytest.approx(max(2.0, found.half_width_pct) + stats.t.ppf(0.8, 2) * se)


def test_warns_only_when_the_bar_is_undetectable() -> None:
    assert power_warnings(WIN2_V1, 3, [noise(None, 0.3)], ["c"]) == []
    (warning,) = power_warnings(WIN2_V1, 3, [noise(None, 2.0)], ["c"])
    assert warning.startswith("cell c: with the archive's within-launch repeat cv of 2.00 % and 3 repeats")
    assert "wider than the 2 % bar" in warning
    assert power_warnings(WIN2_V1, 3, [], ["c"]) == []  # nothing known, nothing claimed


def test_launch_rule_uses_the_launch_spread_and_warns_without_an_archive() -> None:
    (warning,) = power_warnings(WIN2_LAUNCH_V1, 3, [], ["c"])
    assert "no archived control starts" in warning and "1 degree of freedom" in warning
    assert power_warnings(WIN2_LAUNCH_V1, 3, [noise(0.4, 0.2, starts=20)], ["c"]) == []
    (warning,) = power_warnings(WIN2_LAUNCH_V1, 3, [noise(3.0, 0.2, starts=20)], ["c"])
    assert "launch-to-launch cv of 3.00 % over 20 control starts" in warning


def test_the_power_check_uses_each_procedures_own_standard_error() -> None:
    # Seven alternating starts: the fit's variance factor for the effect is 1/4 + 1/3 (drift is
    # orthogonal to the kinds), S - 3 = 4 window degrees of freedom plus the archive's starts - 1.
    from fairwin.decision import RULES, ArchiveNoise, procedure_for

    noise = ArchiveNoise(
        metric="pooled_rate_tps", cell="c", starts=9, windows=3, launch_cv_pct=2.0, repeat_cv_pct=0.5, range_pct=None
    )
    alternating = procedure_for(RULES["win2-alt7-v1"], {}).planned_error(noise, 2)
    assert alternating is not None
    assert alternating.se_pct == pytest.approx(2.0 * (1 / 4 + 1 / 3) ** 0.5)
    assert alternating.df == 4 + 8
    bracket = procedure_for(RULES["win2-launch-v1"], {}).planned_error(noise, 2)
    assert bracket is not None and (bracket.se_pct, bracket.df) == (pytest.approx(2.0 * 1.5**0.5), 1 + 8)
    repeats = procedure_for(RULES["win2-v1"], {}).planned_error(noise, 4)
    assert repeats is not None and (repeats.se_pct, repeats.df) == (pytest.approx(0.5 * (1.5 / 4) ** 0.5), 3)
