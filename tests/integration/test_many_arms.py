"""Many-arm windows (one control, several candidates, win-arms-v1) against real `fairwin sim` servers.

The primary (the server's counters, on the simulator's model clock) is the same in every launch of a role, so
each candidate's verdict at each look is one outcome; rounds of 20 ms from servers at nice 10 keep the client's
guards (decode rate) trusted on a busy machine (see test_window_sim.py's STARVATION_PROOF_CELLS).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import PlanFactory, sim_role, to_toml
from tests.integration.helpers import fairwin, only_window, processes_with, status
from tests.integration.production import killed_inside, production_plan, start_run
from tests.integration.test_window_sim import STARVATION_PROOF_CELLS

SPECULATES = ("--spec-tokens", "3", "--acceptance", "0.8,0.7,0.6")
SPECULATES_LESS = ("--spec-tokens", "2", "--acceptance", "0.5,0.3")


def arms_plan(make_plan: PlanFactory, model: str, **window: object) -> Path:
    def role(*flags: str) -> dict[str, object]:
        return sim_role("--ms-per-round", "20", *flags, model=model, nice=10)

    return make_plan(
        roles={
            "A": role(),
            "B1": role(*SPECULATES),
            "B2": role(*SPECULATES_LESS),
            "B3": role(),
            "B4": role("--fault", "exit-at-start"),
        },
        window={"rule": None, "repeats": 2, "warmup_waves_max": 1, **window},
        cells=STARVATION_PROOF_CELLS,
        modes={"tune": {"control": "A", "candidates": ["B1", "B2", "B3", "B4"]}},
    )


@pytest.mark.slow
def test_a_many_arm_window_drops_what_it_settles_and_names_the_best(make_plan: PlanFactory) -> None:
    plan = arms_plan(make_plan, "arms-best")
    done = fairwin("run", str(plan), "--mode", "tune", "--round-seed", "7")
    assert done.returncode == 0, done.stderr
    window = only_window(plan)
    decision = json.loads((window / "decision.json").read_text())
    arms = decision["arms"]
    assert decision["format"] == "fairwin.decision/4" and decision["rule_id"] == "win-arms-v1"
    assert {arm["candidate"]: arm["verdict"] for arm in arms["arms"]} == {
        "B1": "WIN",
        "B2": "WIN",
        "B3": "NO-CHANGE",
        "B4": "INCONCLUSIVE",  # its server exits at once: dropped at its first start, the others went on
    }
    b4 = next(arm for arm in arms["arms"] if arm["candidate"] == "B4")
    assert "failed: role B4: server exited with code 3 before it was healthy" in b4["why"]
    ranking = arms["ranking"]
    assert (ranking["best"], ranking["runner_up"], ranking["separated"]) == ("B1", "B2", True)
    assert decision["verdict"] == "WIN" and arms["ended"] == "decided" and arms["rounds_run"] == 3
    # B4 failed in round 1 and was not launched again; after round 2 B1 (WIN) and B3 (NO-CHANGE) were settled:
    # round 3 ran the control and B2 alone, and B2's WIN there ended the window.
    manifest = json.loads((window / "window.json").read_text())
    assert (manifest["candidates"], manifest["round_seed"]) == (["B1", "B2", "B3", "B4"], 7)
    planned = manifest["starts"]
    expected = [s["start"] for s in planned if s["round"] == 1]
    expected += [s["start"] for s in planned if s["round"] == 2 and s["role"] != "B4"]
    expected += [s["start"] for s in planned if s["round"] == 3 and s["role"] in ("A", "B2")]
    ran = sorted((p.name for p in (window / "starts").iterdir()), key=lambda s: int(s[1:]))
    assert ran == expected
    pooled = {json.loads(line)["start"] for line in (window / "pooled.jsonl").read_text().splitlines()}
    assert len(pooled) == arms["starts_used"] == 10
    assert [look["states"]["B2"] for look in arms["looks"]] == ["CONTINUE", "WIN"]
    summary = (window / "summary.md").read_text()
    assert "## Candidates" in summary and "**B1 is best" in summary
    assert status(window)["state"] == "complete" and processes_with("arms-best") == []
    replayed = fairwin("decide", str(window))
    assert "recomputed: identical to the recorded decision (WIN)" in replayed.stdout + replayed.stderr
    # The promotion gate promotes the best WIN: its cells are the decision's, and the receipt names it.
    policy = plan.parent / "promote.toml"
    rule = {"id": decision["rule_id"], "sha256": decision["rule_sha256"]}
    policy.write_text(
        to_toml(
            {
                "promote": {
                    "rules": [rule],
                    "mode": "tune",
                    "require_qualification": False,
                    "require_rehearsal": False,
                    "require_greedy": False,
                    "require_restored": False,
                    "require_metrics": ["pooled_rate_tps"],
                    "accept_unjudged_guards": ["accepted_per_round"],  # the control does not speculate
                }
            }
        )
    )
    promoted = fairwin("promote", "check", str(window), "--policy", str(policy))
    assert promoted.returncode == 0 and promoted.stdout.splitlines()[0] == "ALLOWED", promoted.stdout
    assert json.loads((window / "promotion.json").read_text())["candidate"] == "B1"


def test_a_many_arm_window_the_budget_cannot_hold_is_refused_naming_how_many_candidates_would_fit(
    make_plan: PlanFactory,
) -> None:
    plan = arms_plan(make_plan, "arms-budget")
    text = plan.read_text().replace("decode_ms_per_token = 2", "decode_ms_per_token = 2\nmeasurement_limit_min = 0.45")
    plan.write_text(text)
    refused = fairwin("run", str(plan), "--mode", "tune")
    assert refused.returncode == 4, refused.stderr
    said = "its first look comes after 2 rounds of the control and 4 candidates (10 starts); 3 candidates would fit"
    assert said in refused.stderr
    assert not (plan.parent / "windows").exists() or not any((plan.parent / "windows").glob("*/window.json"))


def tune_with_production(make_plan: PlanFactory, model: str) -> Path:
    """A plan with production (role P) and a many-arm mode ``tune``: A against B1 (speculating) and B2."""
    plan = production_plan(
        make_plan,
        model,
        B1=sim_role("--ms-per-round", "2", *SPECULATES, model=f"exp-{model}"),
        B2=sim_role("--ms-per-round", "2", model=f"exp-{model}"),
    )
    plan.write_text(plan.read_text() + '\n[modes."tune"]\ncontrol = "A"\ncandidates = ["B1", "B2"]\n')
    plan.write_text(plan.read_text().replace('rule = "win2-v1"', ""))
    return plan


def test_a_many_arm_window_does_not_chain(make_plan: PlanFactory) -> None:
    plan = tune_with_production(make_plan, "prod-arms-chain")
    refused = fairwin("run", str(plan), "--mode", "tune", "--chain")
    assert refused.returncode == 2
    assert "mode tune is a many-arm window, which does not chain: run it without --chain" in refused.stderr
    assert not (plan.parent / "windows").exists() or not any((plan.parent / "windows").glob("*/window.json"))


def test_a_many_arm_window_killed_mid_round_recovers_with_production_restored(
    make_plan: PlanFactory, stop_production: list[Path]
) -> None:
    plan = tune_with_production(make_plan, "prod-arms")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    window = killed_inside(
        plan, start_run(plan, "--mode", "tune", "--round-seed", "3", kill_at="start s5:begin"), "start s5:begin"
    )
    recovered = fairwin("recover", str(plan))
    assert recovered.returncode == 0, recovered.stderr
    assert "production RESTORED" in recovered.stdout
    assert status(window)["state"] == "interrupted"
    assert processes_with("exp-prod-arms") == [] and len(processes_with("--model prod-arms ")) == 1
    # Its four finished starts (round 1, and one of round 2) decide at a last look over what ran.
    decided = fairwin("decide", "--pooled", str(window / "pooled.jsonl"), "--mode", "tune", "--json")
    assert decided.returncode == 0, decided.stderr
    (document,) = json.loads(decided.stdout)["decisions"]
    assert (document["arms"]["ended"], document["arms"]["rounds_run"], document["arms"]["starts_used"]) == (
        "short",
        1,
        4,
    )
