"""The many-arm rule (win-arms-v1): the round orders, the fit, the rounds' stopping and drops, the document."""

from __future__ import annotations

import collections
import math
from typing import Any

import numpy as np
import pytest

from fairwin.decision import Decision, WindowContext, decide
from fairwin.decision.arms import arrange_arms, fit_arms
from fairwin.decision.arms_audit import ArmsNoise, arms_audit, simulated_window
from fairwin.decision.arms_rounds import run_rounds
from fairwin.rows import DecisionRow, round_orders, williams_rows
from fairwin.rules.registry import RULES, WIN_ARMS_V1


def rows_of(plan: list[tuple[str | None, float]], repeats: int = 3, cell: str = "c") -> list[DecisionRow]:
    """Rows of starts in run order: (arm, level) each, None the control; every metric at the level, repeats
    spread +-1 % around it."""
    rows = []
    for number, (arm, level) in enumerate(plan, 1):
        for repeat in range(1, repeats + 1):
            value = level * (1.0 + 0.01 * (repeat - 2))
            rows.append(
                DecisionRow(
                    start=f"s{number}",
                    kind="control" if arm is None else "candidate",
                    role=arm or "A",
                    cell=cell,
                    repeat=repeat,
                    pooled_rate_tps=value,
                    accepted_per_round=value,
                    decode_tps=value,
                    ms_per_round=1000.0 / value,
                    ttft_s=0.1,
                )
            )
    return rows


def context(candidates: list[str], **fields: object) -> WindowContext:
    return WindowContext(window_id="w", mode="arms", cells=["c"], candidates=candidates, **fields)  # type: ignore[arg-type]


def test_a_williams_design_lets_no_arm_always_follow_another() -> None:
    for arms in (3, 4, 5, 9):
        rows = williams_rows(arms)
        follows = collections.Counter((row[i], row[i + 1]) for row in rows for i in range(arms - 1))
        assert len(follows) == arms * (arms - 1)  # every ordered pair of arms, each equally often
        assert set(follows.values()) == {1 if arms % 2 == 0 else 2}
        assert all(sorted(row) == list(range(arms)) for row in rows)


def test_round_orders_are_seeded_and_hold_every_arm_once() -> None:
    orders = round_orders(["A", "B1", "B2", "B3"], 5, seed=11)
    assert orders == round_orders(["A", "B1", "B2", "B3"], 5, seed=11)
    assert orders != round_orders(["A", "B1", "B2", "B3"], 5, seed=12)
    assert all(sorted(order) == ["A", "B1", "B2", "B3"] for order in orders)


def test_the_fit_recovers_every_effect_and_cancels_a_drift() -> None:
    effects = {"b1": 0.10, "b2": -0.05}
    plan: list[tuple[str | None, float]] = []
    for order in round_orders(["A", "b1", "b2"], 3, seed=4):
        for arm in order:
            position = len(plan)
            level = 100.0 * 0.97**position * (1.0 + effects.get(arm, 0.0))
            plan.append((None if arm == "A" else arm, level))
    table = arrange_arms(rows_of(plan), "c")
    fit = fit_arms(table, "pooled_rate_tps", None, None)
    assert fit.candidates == tuple(dict.fromkeys(a for a, _ in plan if a is not None))
    for arm, effect in effects.items():
        assert math.log1p(effect) == pytest.approx(float(fit.deltas[fit.index(arm)]), abs=1e-9)
    assert fit.df == 9 - 4  # nine starts; level, drift and two effects
    # No launch noise at all: the launch variance is the within-launch repeat variance over n, its floor (the
    # repeats here spread the same in every arm: +-1 % around the start's level).
    assert fit.pooled_tau2 == pytest.approx(0.0, abs=1e-20)
    assert fit.tau2(None, "b1") == pytest.approx(fit.floors[None]) and fit.floors[None] > 0


def test_the_registered_rule_holds_two_to_eight_candidates_and_its_own_sha256() -> None:
    assert RULES["win-arms-v1"] is WIN_ARMS_V1
    assert WIN_ARMS_V1.candidates_allowed == (2, 8)
    assert WIN_ARMS_V1.arm_starts(3) == 20
    assert WIN_ARMS_V1.model_copy(update={"rounds": (2, 3, 4)}).sha256 != WIN_ARMS_V1.sha256
    # Bonferroni over the candidates: every WIN level below the candidate's own LOSS level at the same look.
    for levels in (WIN_ARMS_V1.win_levels or {}).values():
        assert all(w < loss for w, loss in zip(levels, WIN_ARMS_V1.look_levels or (), strict=True))


@pytest.mark.slow  # about 20 s: scipy's multivariate normal, integrated a dozen times
def test_the_registered_levels_are_the_spending_functions(boundaries_tool: Any) -> None:
    tool = boundaries_tool
    rounds = WIN_ARMS_V1.rounds
    assert rounds is not None and WIN_ARMS_V1.win_levels is not None
    information = tool.round_information(rounds)
    assert tool.levels_at(information, 0.025, "pocock") == pytest.approx(WIN_ARMS_V1.look_levels, abs=2e-6)
    assert tool.levels_at(information, 0.025 / 3, "pocock") == pytest.approx(WIN_ARMS_V1.win_levels[3], abs=2e-6)


def test_a_settled_candidate_is_dropped_and_the_window_stops_when_all_are() -> None:
    noise = ArmsNoise((30.0, 30.0, 0.0), repeat_cv_pct=0.5, launch_cv_pct=1.0, archive_starts=20)
    found, rows, ctx = simulated_window(np.random.default_rng(3), WIN_ARMS_V1, noise)
    decision = decide(rows, rule=WIN_ARMS_V1, context=ctx)
    assert decision.arms is not None
    arms = {arm.candidate: arm for arm in decision.arms.arms}
    assert (arms["c1"].verdict, arms["c2"].verdict) == ("WIN", "WIN")
    assert arms["c1"].settled_after_round == 2 and arms["c1"].dropped
    # After round 2 only the open candidate and the control ran: a round of two starts each.
    after_two = {row.start for row in rows if int(row.start[1:]) > 8}
    assert {row.role for row in rows if row.start in after_two and row.kind == "candidate"} == {"c3"}
    assert decision.arms.starts_used == found.starts_run == 8 + 2 * (found.rounds_run - 2)


def test_rows_that_ran_a_dropped_candidate_are_refused() -> None:
    noise = ArmsNoise((30.0, 30.0, 0.0), repeat_cv_pct=0.5, launch_cv_pct=1.0, archive_starts=20)
    _, rows, ctx = simulated_window(np.random.default_rng(3), WIN_ARMS_V1, noise)
    control = next(row.start for row in rows if row.kind == "control")
    first_c1 = next(row.start for row in rows if row.role == "c1")
    # Round 3 (after the look that settled c1 and c2) runs the control and c1 again, not c3.
    again = [row.model_copy(update={"start": "s9"}) for row in rows if row.start == control]
    again += [row.model_copy(update={"start": "s10"}) for row in rows if row.start == first_c1]
    decision = decide([*(r for r in rows if int(r.start[1:]) <= 8), *again], rule=WIN_ARMS_V1, context=ctx)
    assert decision.verdict == "INCONCLUSIVE"
    assert decision.reasons == ["round 3 ran c1, the control; the rule had c3 in play"]


def test_the_best_win_is_named_and_separated_from_the_next() -> None:
    noise = ArmsNoise((30.0, 10.0, 0.0), repeat_cv_pct=0.5, launch_cv_pct=1.0, archive_starts=20)
    _, rows, ctx = simulated_window(np.random.default_rng(5), WIN_ARMS_V1, noise)
    decision = decide(rows, rule=WIN_ARMS_V1, context=ctx)
    assert decision.verdict == "WIN" and decision.arms is not None
    ranking = decision.arms.ranking
    assert (ranking.best, ranking.runner_up, ranking.separated) == ("c1", "c2", True)
    assert ranking.difference_pct is not None and ranking.difference_pct[1] > 0
    assert decision.cells[0].primary is not None and decision.cells[0].primary.estimate is not None
    assert decision.cells[0].primary.estimate.method == "arms"  # the decision's cells are the best arm's
    assert Decision.model_validate_json(decision.model_dump_json()) == decision
    assert decision.format == "fairwin.decision/4"


def test_two_wins_too_close_to_separate_are_said_so() -> None:
    noise = ArmsNoise((20.0, 20.0), repeat_cv_pct=0.5, launch_cv_pct=1.0, archive_starts=20)
    _, rows, ctx = simulated_window(np.random.default_rng(1), WIN_ARMS_V1, noise)
    ranking = decide(rows, rule=WIN_ARMS_V1, context=ctx).arms.ranking  # type: ignore[union-attr]
    assert ranking.separated is False and "not separated" in ranking.line


def test_a_window_killed_mid_round_is_judged_on_the_starts_it_ran() -> None:
    noise = ArmsNoise((0.0, 0.0, 0.0), repeat_cv_pct=3, launch_cv_pct=4)
    _, rows, ctx = simulated_window(np.random.default_rng(2), WIN_ARMS_V1, noise)
    kept = [row for row in rows if int(row.start[1:]) <= 10]  # rounds 1 and 2, and two starts of round 3
    decision = decide(kept, rule=WIN_ARMS_V1, context=ctx)
    assert decision.arms is not None
    assert (decision.arms.ended, decision.arms.rounds_run, decision.arms.starts_used) == ("short", 2, 10)


def test_a_clock_condition_in_one_candidates_start_leaves_the_others_decided() -> None:
    noise = ArmsNoise((30.0, 30.0), repeat_cv_pct=0.5, launch_cv_pct=1.0, archive_starts=20)
    _, rows, ctx = simulated_window(np.random.default_rng(3), WIN_ARMS_V1, noise)
    hot = next(row.start for row in rows if row.role == "c2")
    rows = [row.model_copy(update={"thermal_events": 2 if row.start == hot else 0}) for row in rows]
    decision = decide(rows, rule=WIN_ARMS_V1, context=ctx)
    verdicts = {arm.candidate: arm.verdict for arm in decision.arms.arms}  # type: ignore[union-attr]
    assert verdicts == {"c1": "WIN", "c2": "INCONCLUSIVE"}
    assert decision.verdict == "WIN"


def test_a_count_of_candidates_the_rule_does_not_register_is_inconclusive() -> None:
    rows = rows_of([(None, 100.0), ("b1", 110.0)] * 3)
    decision = decide(rows, rule=WIN_ARMS_V1, context=context(["b1"]))
    assert decision.verdict == "INCONCLUSIVE"
    assert decision.reasons == ["win-arms-v1 decides 2 to 8 candidates; this window has 1"]


def test_the_audit_is_seeded_and_runs_the_stopping() -> None:
    noise = ArmsNoise((30.0, 30.0, 30.0), repeat_cv_pct=0.5, launch_cv_pct=1.0, archive_starts=20)
    first = arms_audit(WIN_ARMS_V1, noise, trials=40, seed=7)
    assert first.counts == arms_audit(WIN_ARMS_V1, noise, trials=40, seed=7).counts
    # A clear +30 % on a quiet host: every candidate WINs at the first look, after two rounds of four starts.
    assert first.counts == {c: {"WIN": 40} for c in noise.candidates}
    assert set(first.starts) == {8}


def test_replaying_the_rounds_takes_the_looks_the_window_took() -> None:
    noise = ArmsNoise((0.0, 0.0), repeat_cv_pct=3, launch_cv_pct=4, drift_pct=-8)
    found, rows, ctx = simulated_window(np.random.default_rng(9), WIN_ARMS_V1, noise)
    again = run_rounds({"audit": arrange_arms(rows, "audit")}, WIN_ARMS_V1, ctx, noise.candidates)
    assert [(look.round, look.after, look.states) for look in again.looks] == [
        (look.round, look.after, look.states) for look in found.looks
    ]
