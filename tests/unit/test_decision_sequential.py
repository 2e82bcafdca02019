"""win2-seq-v1 and -v2: the alternating fit looked at after 3 (with an archive), 5, 7 and 9 starts, stopping when
settled; v2 pools the archive's spread on half its degrees of freedom."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fairwin.decision import (
    RULES,
    WIN2_ALT7_V1,
    WIN2_SEQ_V1,
    WIN2_SEQ_V2,
    ArchiveNoise,
    Decision,
    DecisionRow,
    WindowContext,
    audit,
    decide,
    get_rule,
    procedure_for,
)
from fairwin.decision.sequential import look_points, rule_at_look
from fairwin.rows import order_kinds

METRICS = ("pooled_rate_tps", "accepted_per_round", "decode_tps", "ms_per_round", "ttft_s")


def window_rows(
    means: list[float], order: str = "control-first", cell: str = "c", spread: float = 0.5
) -> list[DecisionRow]:
    """Two repeats a start (mean -+ spread), every metric alike."""
    rows = []
    for (start, kind), mean in zip(order_kinds(order, len(means)).items(), means, strict=True):
        for repeat, value in enumerate((mean - spread, mean + spread), 1):
            fields: dict[str, Any] = dict.fromkeys(METRICS, value)
            rows.append(DecisionRow(start=start, kind=kind, cell=cell, repeat=repeat, **fields))
    return rows


def archive(starts: int, cv: float = 1.0, cell: str = "c") -> list[ArchiveNoise]:
    return [
        ArchiveNoise(
            metric=m, cell=cell, starts=starts, windows=starts, launch_cv_pct=cv, repeat_cv_pct=0.5, range_pct=None
        )
        for m in ("pooled_rate_tps", "accepted_per_round", "decode_tps")
    ]


def decided(rows: list[DecisionRow], **context: Any) -> Decision:
    return decide(rows, rule=WIN2_SEQ_V1, context=WindowContext(window_id="w", mode="m", cells=["c"], **context))


def test_the_default_rule_is_sequential_and_the_rules_before_it_keep_their_sha256() -> None:
    assert get_rule(None) is WIN2_SEQ_V2 and WIN2_SEQ_V2.start_count == 9
    # Registered before later parameters existed: unset, they stay out of the canonical JSON.
    assert {r.id: r.sha256[:16] for r in RULES.values() if r is not WIN2_SEQ_V2} == {
        "win2-v1": "cc766148a94042fe",
        "win2-launch-v1": "2d604cdf07412a5e",
        "win2-alt7-v1": "2c7df7998e9deca5",
        "win2-alt7-client-v1": "e8c047357b445391",
        "win2-seq-v1": "8d6decc107005547",
        "win-arms-v1": "17647fab4ce96188",
    }
    # v2 is v1 but for the archive's degrees of freedom: every other parameter, the levels included, is v1's.
    changed = {k for k, v in WIN2_SEQ_V2.model_dump().items() if v != WIN2_SEQ_V1.model_dump()[k]}
    assert changed == {"id", "description", "archive_df_share"} and WIN2_SEQ_V2.archive_df_share == 0.5
    assert WIN2_SEQ_V1.first_look(9) == 5 and WIN2_SEQ_V1.first_look(10) == 3
    assert WIN2_SEQ_V1.starts_text() == "looks 3*, 5, 7, 9"


def test_every_parameter_of_the_stopping_is_in_the_sha256() -> None:
    for change in (
        {"looks": (3, 5, 7, 11)},
        {"look_levels": (0.01, 0.009, 0.009, 0.009)},
        {"first_look_archive_starts": 12},
        {"spending": "other"},
        {"archive_df_share": 0.6},
    ):
        assert WIN2_SEQ_V2.model_copy(update=change).sha256 != WIN2_SEQ_V2.sha256


@pytest.mark.slow  # about 20 s: scipy's multivariate normal, integrated some forty times
def test_the_registered_levels_are_the_spending_functions(boundaries_tool: Any) -> None:
    tool = boundaries_tool
    looks = WIN2_SEQ_V1.looks
    assert looks is not None
    assert tool.levels(looks, 0.025, "pocock") == pytest.approx(WIN2_SEQ_V1.look_levels, abs=2e-6)
    assert tool.levels(looks, 0.05, "pocock") == pytest.approx(WIN2_SEQ_V1.equivalence_levels, abs=2e-6)
    # Pocock's shape: about the same nominal level at every look, all below the fixed rule's 2.5 %.
    assert all(0.0085 < level < 0.0105 for level in WIN2_SEQ_V1.look_levels or ())


def test_a_look_is_the_alternating_fit_at_its_nominal_level() -> None:
    look = rule_at_look(WIN2_SEQ_V1, 5)
    assert (look.kind, look.start_count, look.looks) == ("alternating", 5, None)
    assert look.confidence == pytest.approx(1 - 2 * 0.009014)
    assert look.equivalence_confidence == pytest.approx(1 - 2 * 0.019202)
    assert look.guard_confidence == pytest.approx(1 - 0.01 / 4)
    assert rule_at_look(WIN2_SEQ_V1, 6).confidence == rule_at_look(WIN2_SEQ_V1, 7).confidence  # between looks


def test_a_clear_win_stops_at_the_first_look_without_an_archive_after_five() -> None:
    rows = window_rows([100, 140, 101, 141, 99])
    found = decided(rows)
    assert found.verdict == "WIN" and found.sequential is not None
    assert [(look.after, look.verdict) for look in found.sequential.looks] == [(5, "WIN")]
    assert (found.sequential.ended, found.sequential.starts_used) == ("decided", 5)
    assert "decided WIN after 5 of at most 9 starts" in found.reasons


def test_with_an_archive_the_first_look_is_after_three() -> None:
    found = decided(window_rows([100, 108, 100]), archive=archive(20))
    assert found.sequential is not None and [look.after for look in found.sequential.looks] == [3]
    assert found.verdict == "WIN"
    assert look_points(WIN2_SEQ_V1, WindowContext(window_id="w", mode="m", cells=["c"], archive=archive(9)), 9) == [
        5,
        7,
        9,
    ]


def test_no_clear_answer_continues_and_is_neutral_at_the_maximum() -> None:
    means = [100, 104, 95, 101, 106, 97, 103, 99, 102]
    found = decided(window_rows(means, spread=3.0))
    assert found.sequential is not None
    assert [(look.after, look.verdict) for look in found.sequential.looks] == [
        (5, "CONTINUE"),
        (7, "CONTINUE"),
        (9, "NEUTRAL"),
    ]
    assert found.sequential.ended == "maximum" and found.verdict == "NEUTRAL"


def test_rows_of_k_starts_replay_the_looks_up_to_k() -> None:
    means = [100, 104, 95, 101, 106, 97, 103, 99, 102]
    at_seven = decided(window_rows(means[:7], spread=3.0))
    whole = decided(window_rows(means, spread=3.0))
    assert at_seven.sequential is not None and whole.sequential is not None
    assert at_seven.sequential.looks[:1] == whole.sequential.looks[:1]
    assert at_seven.sequential.looks[-1].after == 7 and at_seven.sequential.ended == "short"
    assert at_seven.sequential.looks[-1].verdict == "CONTINUE" and at_seven.verdict == "NEUTRAL"
    stopped = decided(window_rows(means[:7], spread=3.0), stop_reason="the budget: s8 and s9 would end ...")
    assert stopped.sequential is not None and stopped.sequential.ended == "budget"
    assert "stopped at the budget after 7 of 9 starts: NEUTRAL" in stopped.reasons


def test_a_window_that_ended_between_looks_is_judged_on_what_it_finished() -> None:
    found = decided(window_rows([100, 140, 101, 141, 99, 140]))
    assert found.sequential is not None and [look.after for look in found.sequential.looks] == [5]
    unfinished = decided(window_rows([100, 104, 95, 101, 106, 97], spread=3.0))
    assert unfinished.sequential is not None
    assert [look.after for look in unfinished.sequential.looks] == [5, 6]  # the last at the next look's level


def test_a_failed_guard_stops_the_window_with_loss() -> None:
    rows = window_rows([100, 140, 101, 141, 99])
    rows = [
        r.model_copy(update={"accepted_per_round": r.accepted_per_round * (0.5 if r.kind == "candidate" else 1.0)})
        if r.accepted_per_round is not None
        else r
        for r in rows
    ]
    found = decided(rows)
    assert found.verdict == "LOSS" and found.sequential is not None and found.sequential.ended == "decided"
    assert any("guard accepted_per_round FAILED" in reason for reason in found.cells[0].reasons)


def test_a_cell_keeps_the_verdict_of_the_look_it_crossed_at() -> None:
    # Cell a crosses at 5; cell b only at 7: a's verdict is its look-5 decision, whatever starts 6 and 7 say.
    a = window_rows([100, 140, 101, 141, 99, 100, 100], cell="a")
    b = window_rows([100, 104, 95, 111, 104, 112, 101], cell="b", spread=1.0)
    found = decide(a + b, rule=WIN2_SEQ_V1, context=WindowContext(window_id="w", mode="m", cells=["a", "b"]))
    assert found.sequential is not None
    first = found.sequential.looks[0]
    assert first.after == 5 and first.cells["a"] == "WIN" and first.cells["b"] == "CONTINUE"
    (cell_a,) = [c for c in found.cells if c.cell == "a"]
    assert cell_a.verdict == "WIN" and cell_a.primary is not None and cell_a.primary.estimate is not None
    assert len(cell_a.primary.estimate.control) == 2  # the look-5 fit: per-repeat means over its starts


def test_the_audit_runs_the_stopping_and_counts_the_starts() -> None:
    clear = audit(WIN2_SEQ_V1, repeat_cv_pct=0.5, launch_cv_pct=1.0, archive_starts=20, effect_pct=5.0, trials=200)
    assert clear.power is not None and clear.power > 0.9
    assert clear.starts_median == 3 and clear.max_starts == 9
    fixed = audit(WIN2_ALT7_V1, repeat_cv_pct=0.5, launch_cv_pct=1.0, archive_starts=20, effect_pct=5.0, trials=50)
    assert (fixed.starts_mean, fixed.starts_p90) == (7.0, 7.0)
    null = audit(WIN2_SEQ_V1, repeat_cv_pct=13, launch_cv_pct=8, drift_pct=-8, trials=200)
    assert null.starts_median == 9 and (null.false_win or 0) <= 0.025 + 2 * null.mc_error


def test_stopping_is_seeded_and_pure() -> None:
    rng = np.random.default_rng(3)
    means = list(100 + rng.normal(0, 3, 9))
    assert decided(window_rows(means)) == decided(window_rows(means))


def test_a_replay_of_rows_past_the_deciding_look_reports_the_looks_starts_not_the_rows() -> None:
    # Nine starts whose candidate is far ahead: look 5 decides; the rows of s6 to s9 go unread.
    means = [100.0, 130.0, 100.0, 130.0, 100.0, 130.0, 100.0, 130.0, 100.0]
    decision = decided(window_rows(means))
    assert decision.sequential is not None and decision.sequential.ended == "decided"
    assert [look.after for look in decision.sequential.looks] == [5]
    assert decision.sequential.starts_used == 5
    assert decision.reasons[-1] == f"decided {decision.verdict} after 5 of at most 9 starts"


def test_a_window_that_ended_before_the_first_look_its_archive_allows_is_judged_at_that_looks_level() -> None:
    # Killed after 3 starts with 5 archived control starts: look 3 needs 10, so its first look is 5, and the
    # three starts are judged at look 5's level, never at look 3's, which this window could not take.
    looks, levels = WIN2_SEQ_V1.looks, WIN2_SEQ_V1.look_levels
    assert looks is not None and levels is not None
    decision = decided(window_rows([100.0, 103.0, 100.0]), archive=archive(5))
    assert decision.sequential is not None and decision.sequential.ended == "short"
    (look,) = decision.sequential.looks
    assert look.after == 3 and look.level == pytest.approx(1.0 - 2.0 * levels[looks.index(5)])
    with_ten = decided(window_rows([100.0, 103.0, 100.0]), archive=archive(10))  # look 3 allowed: its own level
    assert with_ten.sequential is not None
    assert with_ten.sequential.looks[0].level == pytest.approx(1.0 - 2.0 * levels[looks.index(3)])
    assert rule_at_look(WIN2_SEQ_V1, 3, (5, 7, 9)).confidence == rule_at_look(WIN2_SEQ_V1, 5).confidence


def test_v2_pools_the_archives_spread_on_half_its_degrees_of_freedom() -> None:
    # Three starts and an archive of 11: the look after 3 has no residual of its own, so its interval rests on
    # the archive alone, on 10 degrees of freedom under v1 and 5 under v2: the same point, a wider interval.
    rows = window_rows([100.0, 104.0, 100.0])
    context = {"archive": archive(11), "order": "control-first"}
    v1 = decided(rows, **context)
    v2 = decide(rows, rule=WIN2_SEQ_V2, context=WindowContext(window_id="w", mode="m", cells=["c"], **context))
    one, two = (d.cells[0].primary.estimate for d in (v1, v2) if d.cells[0].primary is not None)
    assert one is not None and two is not None
    assert (one.df, two.df) == (10.0, 5.0) and one.point_pct == pytest.approx(two.point_pct)
    assert two.ci_high_pct - two.ci_low_pct > one.ci_high_pct - one.ci_low_pct
    assert v1.sequential is not None and v2.sequential is not None
    assert v1.sequential.starts_used == v2.sequential.starts_used == 3
    # The power gate's planned error counts the archive's degrees of freedom as the decision does.
    noise = archive(11)[0]
    planned = {r.id: procedure_for(r, {}).planned_error(noise, 2) for r in (WIN2_SEQ_V1, WIN2_SEQ_V2)}
    assert {rule: p.df for rule, p in planned.items() if p is not None} == {"win2-seq-v1": 16.0, "win2-seq-v2": 11.0}


@pytest.mark.parametrize("rule", [WIN2_SEQ_V1, WIN2_SEQ_V2])
def test_one_complete_repeat_a_start_is_inconclusive_as_documented(rule: Any) -> None:
    # The launch variance is never taken below the repeats' share, and one repeat cannot estimate it.
    rows = [r for r in window_rows([100.0, 130.0, 100.0, 130.0, 100.0]) if r.repeat == 1]
    found = decide(rows, rule=rule, context=WindowContext(window_id="w", mode="m", cells=["c"]))
    assert found.verdict == "INCONCLUSIVE"
    assert "1 complete repeat(s); an interval needs at least 2" in " ".join(found.cells[0].reasons)
