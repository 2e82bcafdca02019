from __future__ import annotations

from pathlib import Path

import pytest

from fairwin.decision import get_rule
from fairwin.errors import GateRefused
from fairwin.gates.budget import check_budget, render_table
from fairwin.gates.calibration import Calibration, cell_key, role_key
from fairwin.gates.estimate import estimate
from fairwin.plan import load_plan, resolve_mode
from fairwin.report.dryplan import render_dry_plan
from tests.conftest import PlanFactory, sim_role


def test_assumed_estimate_by_hand(make_plan: PlanFactory) -> None:
    # conftest budget: start 1 s, stop 1 s, 2 ms/token decode, 0.5 ms/token prefill (default);
    # cell: 2 families x 3 repeats = 6 waves of 2 streams of (64 prompt + 48 decode) tokens; warm-up: one
    # 16-token stream and at most 4 uncounted waves of that cell.
    loaded = load_plan(make_plan())
    found = estimate(loaded, "controlled", resolve_mode(loaded, "controlled"))
    stream = (64 * 0.5 + 48 * 2) / 1000
    warmup = (64 * 0.5 + 16 * 2) / 1000 + 4 * 2 * stream
    per_start = 1 + warmup + 6 * 2 * stream + 1
    assert [c.start for c in found.starts] == ["s1", "s2", "s3"]
    assert found.measurement_end_s == pytest.approx(3 * per_start)
    assert found.reserve_total_s == pytest.approx(3 * per_start + 333)
    assert found.dry_bound_s == pytest.approx(3 * per_start + 600)
    assert found.sources["role A start"] == "assumed: 1 s ([budget] startup_s)"


def test_measured_costs_replace_assumed_ones(make_plan: PlanFactory) -> None:
    loaded = load_plan(make_plan())
    plan = loaded.plan
    calibration = Calibration(
        startup_s={role_key(plan.roles["A"]): [10.0, 30.0, 20.0]},
        stop_s={role_key(plan.roles["A"]): [2.0]},
        wave_s={cell_key(plan.cells["short-b1"]): [4.0, 5.0, 6.0]},
    )
    found = estimate(loaded, "controlled", resolve_mode(loaded, "controlled"), calibration)
    s1 = found.starts[0]
    assert (s1.startup_s, s1.stop_s, s1.waves_s) == (20.0, 2.0, 6 * 5.0)
    assert found.starts[1].startup_s == 1.0  # role B has no history: assumed
    assert found.sources["role A start"] == "measured: median 20.0 s over 3 starts"
    assert found.sources["cell short-b1"] == "measured: median wave 5.0 s over 3 waves"


def test_refusals_name_what_would_fit(make_plan: PlanFactory) -> None:
    path = make_plan()
    path.write_text(path.read_text().replace("decode_ms_per_token = 2", "decode_ms_per_token = 2\nlimit_min = 10.1"))
    loaded = load_plan(path)
    found = estimate(loaded, "controlled", resolve_mode(loaded, "controlled"))
    with pytest.raises(GateRefused, match=r"dry bound is 10\.\d min, over the 10.1 min limit; it fits while the pair"):
        check_budget(loaded, found)
    path.write_text(path.read_text().replace("limit_min = 10.1", "measurement_limit_min = 0.01"))
    loaded = load_plan(path)
    with pytest.raises(GateRefused, match=r"past its 0\.01 min limit"):
        check_budget(loaded, estimate(loaded, "controlled", resolve_mode(loaded, "controlled")))


def test_a_max_starts_under_the_first_look_names_only_the_rules_that_fit_it(make_plan: PlanFactory) -> None:
    loaded = load_plan(make_plan(window={"rule": None}), ["budget.max_starts=3"])
    with pytest.raises(GateRefused) as refused:
        check_budget(loaded, estimate(loaded, "controlled", resolve_mode(loaded, "controlled")))
    assert str(refused.value) == (
        "max_starts is 3, but rule win2-seq-v2: its first look comes after 5 starts; registered rules that "
        "would fit: win2-v1 (3 starts), win2-launch-v1 (3 starts) (window.rule); raise max_starts in [budget] to at "
        "least 5 (refused by the budget check)"
    )


def test_the_dry_plan_says_the_budgets_cap_on_the_starts(make_plan: PlanFactory) -> None:
    loaded = load_plan(make_plan(window={"rule": None}), ["budget.max_starts=5"])
    mode = resolve_mode(loaded, "controlled")
    shown = render_dry_plan(loaded, "controlled", mode, get_rule(None), [estimate(loaded, "controlled", mode)])
    assert "archived control starts; at most 5 (budget.max_starts; the rule's 9), kinds alternating" in shown
    assert "\n  s5  " in shown and "\n  s6  " not in shown  # five starts listed, no sixth


def runbook_plan(make_plan: PlanFactory, rule: str | None) -> Path:
    """The runbook's shape and registered inputs: one 32K-prompt cell, 3 repeats x 2 families, one stream a wave;
    A, B and P, P starting 19.5 s slower than A (production's own weights and config); a start of A or B costs
    4,088 / 3 s, the restore with its watch 385 s, the pair reserve 333 s and the dry reserve 600 s."""
    cell = {"families": ["prose", "code"], "prompt_tokens": 32768, "max_tokens": 512, "streams_per_wave": 1}
    roles = {"A": sim_role(model="rb-a"), "B": sim_role(model="rb-b"), "P": sim_role(model="rb-p")}
    path = make_plan(roles=roles, cells={"32k-b1": cell}, window={"rule": rule, "warmup_waves_max": 0})
    waves = 6 * (32768 * 0.5 + 512 * 20) / 1000  # 0.5 ms a prefill token, 20 ms a decode token
    warmup = (32768 * 0.5 + 16 * 20) / 1000
    startup = 4088 / 3 - waves - warmup - 10
    budget = (
        f"startup_s = {startup!r}\nstop_s = 10\ndecode_ms_per_token = 20\nrestore_s = 385\n"
        f"role_startup_s = {{ P = {startup + 19.5!r} }}"
    )
    path.write_text(path.read_text().replace("startup_s = 1\nstop_s = 1\ndecode_ms_per_token = 2", budget))
    return path


def test_the_runbooks_estimated_hold_under_win2_v1(make_plan: PlanFactory) -> None:
    loaded = load_plan(runbook_plan(make_plan, "win2-v1"))
    found = [estimate(loaded, name, resolve_mode(loaded, name)) for name in ("controlled", "production-policy")]
    assert render_table(found, loaded)[2:] == [
        "| controlled | 3 starts (its starts) | 80.1 min | 68.1 min | 84.5 min |",
        "| production-policy | 3 starts (its starts) | 80.8 min | 68.8 min | 85.2 min (refuses; fits while the "
        "measured pair reserve is at most 588 s) |",
    ]
    check_budget(loaded, found[0])
    with pytest.raises(GateRefused, match=r"nothing measured a pair reserve yet, and the dry bound is 85\.2 min"):
        check_budget(loaded, found[1])
    # Earlier windows measured P's and B's restarts: the gate holds the measured reserve, and the window fits.
    plan = loaded.plan
    measured = Calibration(
        startup_s={role_key(plan.roles["P"]): [150.0], role_key(plan.roles["B"]): [163.0]},
        stop_s={role_key(plan.roles["P"]): [10.0], role_key(plan.roles["B"]): [10.0]},
    )
    policy = estimate(loaded, "production-policy", resolve_mode(loaded, "production-policy"), measured)
    assert policy.pair_reserve_measured and policy.pair_reserve_s == 333.0
    assert policy.sources["pair reserve"] == "measured: 333.0 s to stop and start the pair again (medians)"
    check_budget(loaded, policy)
    assert "(measured)" in render_table([policy], loaded)[2]


def test_the_runbooks_plan_fits_under_the_default_rule_with_an_archive_and_is_refused_without(
    make_plan: PlanFactory,
) -> None:
    loaded = load_plan(runbook_plan(make_plan, None))
    mode = resolve_mode(loaded, "controlled")
    with_archive = estimate(loaded, "controlled", mode, archive_starts=10)
    assert (with_archive.rule_id, with_archive.first_look, len(with_archive.starts)) == ("win2-seq-v2", 3, 9)
    check_budget(loaded, with_archive)  # the first look, after 3 starts, ends at 68.1 min
    assert render_table([with_archive], loaded)[2:] == [
        "| controlled | 3 starts (first look) | 80.1 min | 68.1 min | 84.5 min |",
        "| controlled | 9 starts (maximum) | 216.4 min | 204.4 min | 220.8 min (over) |",
    ]
    without = estimate(loaded, "controlled", mode, archive_starts=9)
    with pytest.raises(GateRefused) as refused:
        check_budget(loaded, without)
    assert str(refused.value) == (
        "the measurement would end at 113.6 min, past its 73 min limit; rule win2-seq-v2: its first look "
        "comes after 5 starts; registered rules that would fit: win2-v1 (3 starts), win2-launch-v1 (3 starts) "
        "(window.rule); or fewer repeats, cells or streams, or a larger limit in [budget] (refused by the budget check)"
    )
    alt7 = load_plan(runbook_plan(make_plan, "win2-alt7-v1"))
    with pytest.raises(GateRefused, match=r"end at 159\.0 min, .* rule win2-alt7-v1: it runs 7 starts; "):
        check_budget(alt7, estimate(alt7, "controlled", resolve_mode(alt7, "controlled")))


def test_greedy_diagnostics_and_a_roles_own_start_up_are_budgeted(make_plan: PlanFactory) -> None:
    path = make_plan()
    path.write_text(
        path.read_text().replace("decode_ms_per_token = 2", "decode_ms_per_token = 2\nrole_startup_s = { B = 7 }")
        + "\n[diagnostics.greedy]\nprompts = 2\nmax_tokens = 10\n"
    )
    loaded = load_plan(path)
    found = estimate(loaded, "controlled", resolve_mode(loaded, "controlled"))
    greedy = 2 * (64 * 0.5 + 10 * 2) / 1000  # the candidate's first start: 2 prompts of the deciding cell
    assert [(c.start, c.startup_s, c.diagnostics_s) for c in found.starts] == [
        ("s1", 1.0, 0.0),
        ("s2", 7.0, pytest.approx(greedy)),
        ("s3", 1.0, 0.0),
    ]
    assert found.sources["role B start"] == "assumed: 7 s ([budget] role_startup_s)"
    assert found.sources["greedy diagnostics"].startswith("assumed: 0.1 s a diagnosed start (2 prompts x 1 cells")
    assert found.starts[1].total_s - found.starts[0].total_s == pytest.approx(6.0 + greedy)
