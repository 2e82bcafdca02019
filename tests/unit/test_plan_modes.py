"""A plan's many-arm modes: their candidates, a sweep made into roles, and the rule that decides them."""

from __future__ import annotations

import pytest

from fairwin.errors import PlanError
from fairwin.plan import load_plan
from fairwin.plan.schedule import round_ends, window_starts
from tests.conftest import PlanFactory, sim_role

ROLES = {name: sim_role("--ms-per-round", "2") for name in ("A", "B", "C", "D")}


def refused(make_plan: PlanFactory, **sections: object) -> str:
    path = make_plan(**sections)  # type: ignore[arg-type]
    with pytest.raises(PlanError) as exc:
        load_plan(path)
    assert "\n" not in str(exc.value)  # one line
    return str(exc.value)


def test_a_many_arm_mode_is_decided_by_the_many_arm_rule_unless_it_names_another(make_plan: PlanFactory) -> None:
    loaded = load_plan(
        make_plan(roles=ROLES, window={"rule": None}, modes={"tune": {"control": "A", "candidates": ["B", "C", "D"]}})
    )
    mode = loaded.plan.all_modes()["tune"]
    assert (mode.many, mode.arms, mode.roles) == (True, ("B", "C", "D"), ("A", "B", "C", "D"))
    assert loaded.plan.rule_for("tune").id == "win-arms-v1"
    assert loaded.plan.rule_for("controlled").id == "win2-seq-v2"  # the plan's two-arm mode keeps the default


def test_a_mode_and_a_rule_of_different_kinds_are_refused_naming_the_fix(make_plan: PlanFactory) -> None:
    many = {"tune": {"control": "A", "candidates": ["B", "C"], "rule": "win2-seq-v2"}}
    said = refused(make_plan, roles=ROLES, modes=many)
    assert "mode tune has 2 candidates; win2-seq-v2 decides one candidate: name a many-arm rule (win-arms-v1)" in said
    two = {"pair": {"control": "A", "candidate": "B", "rule": "win-arms-v1"}}
    said = refused(make_plan, roles=ROLES, modes=two)
    assert "mode pair has one candidate; win-arms-v1 decides several: list them in modes.pair.candidates" in said


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ({"control": "A", "candidate": "B", "candidates": ["C", "D"]}, "names its candidate role, or"),
        ({"control": "A", "candidates": ["B"]}, "has 2 to 8 candidates, not 1"),
        ({"control": "A", "candidates": ["A", "B"]}, "distinct roles, none of them the control"),
        ({"control": "A", "candidates": ["B", "Z"]}, "modes.m.candidates names role 'Z', which is not declared"),
    ],
)
def test_a_many_arm_modes_candidates_are_checked(make_plan: PlanFactory, mode: dict[str, object], said: str) -> None:
    assert said in refused(make_plan, roles=ROLES, window={"rule": None}, modes={"m": mode})


def test_a_sweep_makes_one_role_per_value_from_its_role(make_plan: PlanFactory) -> None:
    sweep = {"role": "B", "flag": "--spec-tokens", "values": [2, 4]}
    loaded = load_plan(
        make_plan(
            roles={"A": ROLES["A"], "B": sim_role("--spec-tokens", "3", "--ms-per-round", "2")},
            window={"rule": None},
            modes={
                "draft": {"control": "A", "sweep": sweep},
                "more": {"control": "A", "sweep": {**sweep, "flag": "--acceptance", "values": ["0.5", "0.9"]}},
            },
        )
    )
    roles = loaded.plan.roles
    assert loaded.plan.all_modes()["draft"].candidates == ["B-2", "B-4"]
    assert roles["B-2"].argv[-4:] == ["--spec-tokens", "2", "--ms-per-round", "2"]  # the flag's value replaced
    assert roles["B-0.9"].argv[-2:] == ["--acceptance", "0.9"]  # a flag the role lacks: appended
    assert roles["B"].argv[-4:] == ["--spec-tokens", "3", "--ms-per-round", "2"]  # the swept role itself unchanged


def test_a_sweep_that_cannot_make_its_roles_is_refused(make_plan: PlanFactory) -> None:
    missing = {"draft": {"control": "A", "sweep": {"role": "Z", "flag": "--x", "values": [1, 2]}}}
    assert "modes.draft.sweep.role names role 'Z', which is not declared" in refused(
        make_plan, roles=ROLES, modes=missing
    )
    clash = {"draft": {"control": "A", "sweep": {"role": "B", "flag": "--x", "values": ["1", "C"]}}}
    roles = {**ROLES, "B-C": ROLES["A"]}
    assert "value 'C' makes role 'B-C', which is not a free name" in refused(make_plan, roles=roles, modes=clash)


def test_a_many_arm_window_plans_every_arm_every_round_and_looks_after_each_round_from_the_second(
    make_plan: PlanFactory,
) -> None:
    loaded = load_plan(
        make_plan(roles=ROLES, window={"rule": None}, modes={"tune": {"control": "A", "candidates": ["B", "C", "D"]}})
    )
    rule = loaded.plan.rule_for("tune")
    starts = window_starts(loaded.plan.all_modes()["tune"], rule, seed=11)
    assert [s.name for s in starts] == [f"s{n}" for n in range(1, 21)]
    assert [sorted(s.role for s in starts if s.round == r) for r in range(1, 6)] == [["A", "B", "C", "D"]] * 5
    assert round_ends(starts) == {1: 4, 2: 8, 3: 12, 4: 16, 5: 20}
    assert starts == window_starts(loaded.plan.all_modes()["tune"], rule, seed=11)  # the seed repeats them


def test_a_many_arm_windows_estimate_names_each_start_as_its_seed_will_run_it(make_plan: PlanFactory) -> None:
    from fairwin.gates.estimate import estimate

    roles = {"A": sim_role("--ms-per-round", "2"), "B": sim_role(startup_timeout_s=30), "C": sim_role()}
    plan = make_plan(roles=roles, window={"rule": None}, modes={"tune": {"control": "A", "candidates": ["B", "C"]}})
    loaded = load_plan(plan)
    mode, rule = loaded.plan.all_modes()["tune"], loaded.plan.rule_for("tune")
    orders = {seed: [s.role for s in window_starts(mode, rule, seed=seed)] for seed in (0, 3, 11)}
    assert orders[3] != orders[0] and orders[11] != orders[0]  # else the estimate's default order would pass too
    for seed in (3, 11):
        found = estimate(loaded, "tune", mode, round_seed=seed)
        assert [(cost.start, cost.role) for cost in found.starts] == [
            (start.name, start.role) for start in window_starts(mode, rule, seed=seed)
        ]
    assert estimate(loaded, "tune", mode, round_seed=3).measurement_end_s == pytest.approx(
        estimate(loaded, "tune", mode, round_seed=11).measurement_end_s
    )  # every round holds every arm: the order moves costs between names, not the total
