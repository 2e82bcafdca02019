"""Greedy diagnostics in a window on `fairwin sim`: a wrong token is found where it is, a near-tie is shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fairwin.errors import ANSWER_IS_NO
from fairwin.files import read_jsonl
from tests.conftest import PlanFactory, sim_role, to_toml
from tests.integration.helpers import fairwin, only_window

FAULT_AT = 3  # fairwin sim's greedy faults bend this position (0-based)


def greedy_plan(make_plan: PlanFactory, fault: str) -> Path:
    """Rounds of 10 ms and servers at nice 10: the client's timing trusted on a busy machine (make test, 2026-12-06:
    at 2 ms a round, a 14-ms wait for a CPU during a 56-ms stream left a repeat's client decode rate unobserved and
    the window INCONCLUSIVE; a stream is now about 160 ms, and a wait is untrusted above a fifth of it)."""
    candidate = sim_role(
        "--ms-per-round", "10", "--spec-tokens", "3", "--acceptance", "0.8", "--fault", fault, model="g", nice=10
    )
    roles = {"A": sim_role("--ms-per-round", "10", model="g", nice=10), "B": candidate}
    plan = make_plan(roles=roles, window={"repeats": 3, "warmup_waves_max": 1, "report_html": True})
    plan.write_text(
        plan.read_text() + '\n[diagnostics.greedy]\non = ["control", "candidate"]\nprompts = 2\nmax_tokens = 12\n'
    )
    return plan


@pytest.mark.slow
def test_a_wrong_token_is_a_real_divergence_at_its_position_shown_in_the_decision_and_report(
    make_plan: PlanFactory,
) -> None:
    plan = greedy_plan(make_plan, "greedy-wrong-token")
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 0, done.stderr  # a correctness failure stands beside the speed verdict
    window = only_window(plan)
    assert sorted(p.parent.name for p in window.glob("starts/*/greedy.jsonl")) == ["s1", "s2"]  # first of each kind
    rows = read_jsonl(window / "starts" / "s2" / "greedy.jsonl")
    assert len(rows) == 2 and all(len(r["tokens"]) == 12 and len(r["top"]) == 12 for r in rows)
    greedy = json.loads((window / "decision.json").read_text())["greedy"]
    assert (greedy["streams"], greedy["compared"], greedy["identical"]) == (4, 2, 0)
    assert {(d["start"], d["reference"], d["position"], d["near_tie"]) for d in greedy["divergences"]} == {
        ("s2", "s1", FAULT_AT, False)
    }
    summary = (window / "summary.md").read_text()
    assert "2 real divergence(s); CORRECTNESS FAILURE" in summary and "**REAL**" in summary
    assert "Greedy diagnostics" in (window / "report.html").read_text()
    # And the promotion refuses it, for that reason alone under a policy that asks nothing else.
    decision = json.loads((window / "decision.json").read_text())
    policy = plan.parent / "promote.toml"
    policy.write_text(
        to_toml(
            {
                "promote": {
                    "rules": [{"id": decision["rule_id"], "sha256": decision["rule_sha256"]}],
                    "mode": "controlled",
                    "require_qualification": False,
                    "require_rehearsal": False,
                    "require_restored": False,
                }
            }
        )
    )
    refused = fairwin("promote", "check", str(window), "--policy", str(policy))
    assert refused.returncode == ANSWER_IS_NO and refused.stdout.splitlines()[0] == "REFUSED"
    assert [line.split(":")[0] for line in refused.stdout.splitlines()[1:]] == ["  - real greedy divergence"] * 2


@pytest.mark.slow
def test_a_near_tie_is_shown_and_is_no_correctness_failure(make_plan: PlanFactory) -> None:
    plan = greedy_plan(make_plan, "greedy-near-tie")
    assert fairwin("run", str(plan), "--mode", "controlled", "--quiet").returncode == 0
    greedy = json.loads((only_window(plan) / "decision.json").read_text())["greedy"]
    assert [(d["position"], d["near_tie"]) for d in greedy["divergences"]] == [(FAULT_AT, True)] * 2
    assert "CORRECTNESS FAILURE" not in (only_window(plan) / "summary.md").read_text()
