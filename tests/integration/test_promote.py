"""`fairwin promote check`: one window with everything a promotion rests on is ALLOWED; each reason for a refusal,
one at a time, REFUSES it, on real receipts (git, a gate, a rehearsal), a real production and `fairwin sim`."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fairwin.decision.divergence import Divergence
from fairwin.directory.layout import WindowDir
from fairwin.errors import ANSWER_IS_NO
from fairwin.promote.check import CHECKS, gather
from fairwin.promote.policy import PromotionPolicy
from tests.conftest import PlanFactory, plan_factory, sim_role, to_toml
from tests.integration.helpers import fairwin
from tests.integration.production import WATCH
from tests.integration.test_gates import QUALIFICATION, admission, carry, gate_run, git, make_repo
from tests.ports import free_port

pytestmark = pytest.mark.slow  # one production-policy window with every receipt, built once for the module


@pytest.fixture(scope="module")
def promoted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A production-policy window given a carried qualification, a PASS gate and a PASS rehearsal; its production
    restored and watched; greedy diagnostics without divergence. Built once: every test reads it or a copy."""
    root = tmp_path_factory.mktemp("promote")
    repo = make_repo(root)
    make_plan = plan_factory(root)
    port = free_port()
    roles = {
        "P": sim_role("--spec-tokens", "2", "--acceptance", "0.3", model="prod", port=port),
        "B": sim_role("--spec-tokens", "4", "--acceptance", "0.8", model="prod"),
    }
    plan = make_plan(roles=roles, window={"repeats": 3, "warmup_waves_max": 1}, production={"role": "P", **WATCH})
    qualification = ["[qualification]", f'repo = "{repo}"'] + [
        f"{k} = {json.dumps(v)}" for k, v in QUALIFICATION.items()
    ]
    plan.write_text(
        plan.read_text() + "\n" + "\n".join(qualification) + f'\n[rehearsal]\nurl = "http://127.0.0.1:{port}"'
        '\nmodel = "prod"\n\n[diagnostics.greedy]\nprompts = 1\nmax_tokens = 8\n'
    )
    q = git(repo, "rev-parse", "HEAD")
    carried, gate, rehearsal = root / "carried.json", root / "gate.json", root / "rehearsal"
    assert carry(plan, admission(root, repo, q), q, carried).returncode == 0
    assert gate_run(repo, gate, sys.executable, "-c", "pass").returncode == 0
    assert fairwin("production", "up", str(plan)).returncode == 0
    try:
        assert fairwin("rehearse", str(plan), "--out", str(rehearsal)).returncode == 0
        done = fairwin(
            "run",
            str(plan),
            "--mode",
            "production-policy",
            "--quiet",
            "--qualification",
            str(carried),
            "--require-gate",
            str(gate),
            "--require-rehearsal",
            str(rehearsal),
        )
        assert done.returncode == 0, done.stderr
        (window,) = [p for p in (plan.parent / "windows").iterdir() if p.is_dir() and not p.name.startswith(".")]
        decision = json.loads((window / "decision.json").read_text())
        yield {"root": root, "plan": plan, "window": window, "decision": decision}
    finally:
        fairwin("production", "down", str(plan))


def policy(promoted: dict[str, Any], **changes: Any) -> Path:
    decision = promoted["decision"]
    table: dict[str, Any] = {
        "rules": [{"id": decision["rule_id"], "sha256": decision["rule_sha256"]}],
        "require_gates": ["rng"],
        "require_metrics": ["pooled_rate_tps"],
        **changes,
    }
    path = promoted["root"] / f"policy-{len(list(promoted['root'].glob('policy-*')))}.toml"
    path.write_text(to_toml({"promote": table}))
    return path


def check(window: Path, policy_file: Path) -> tuple[int, list[str], dict[str, Any]]:
    out = window.parent / f"{window.name}-promotion-{policy_file.stem}.json"
    done = fairwin("promote", "check", str(window), "--policy", str(policy_file), "--to", str(out))
    assert done.returncode in (0, ANSWER_IS_NO), done.stderr
    receipt = json.loads(out.read_text())
    assert done.stdout.splitlines()[0] == receipt["verdict"]
    assert [line.removeprefix("  - ") for line in done.stdout.splitlines()[1:]] == receipt["reasons"]
    return done.returncode, receipt["reasons"], receipt


def test_a_window_with_everything_it_rests_on_is_allowed(promoted: dict[str, Any]) -> None:
    code, reasons, receipt = check(promoted["window"], policy(promoted))
    assert (code, reasons, receipt["verdict"]) == (0, [], "ALLOWED")
    assert receipt["format"] == "fairwin.promotion/1" and len(receipt["sha256"]) == 64
    assert all(c["ok"] for c in receipt["checks"]) and receipt["decision_sha256"]
    assert receipt["commit"] == json.loads((promoted["window"] / "window.json").read_text())["gates"]["head"]


POLICY_REFUSALS = {
    "a rule the policy does not accept": (
        {"rules": [{"id": "win2-v1", "sha256": "0" * 64}]},
        "is not one the policy accepts",
    ),
    "another mode": ({"mode": "controlled"}, "ran in mode production-policy; the policy requires controlled"),
    "a gate never given": ({"require_gates": ["rng", "lint"]}, "gate lint: no PASS receipt was given to the window"),
    "clock caps unobserved": ({"require_observed_clock_caps": True}, "clock caps were not observed"),
}
PER_CELL = ("clock caps unobserved",)  # one line for each deciding cell


@pytest.mark.parametrize("case", sorted(POLICY_REFUSALS))
def test_each_policy_requirement_refuses_alone(promoted: dict[str, Any], case: str) -> None:
    changes, reason = POLICY_REFUSALS[case]
    code, reasons, _ = check(promoted["window"], policy(promoted, **changes))
    deciding = sum(c["decides"] for c in promoted["decision"]["cells"])
    assert code == ANSWER_IS_NO and len(reasons) == (deciding if case in PER_CELL else 1), reasons
    assert all(reason in r for r in reasons)


def test_a_misspelt_metric_is_bad_input_naming_the_metrics(promoted: dict[str, Any]) -> None:
    out = promoted["root"] / "misspelt.json"
    misspelt = policy(promoted, require_metrics=["pooled_rate"])
    done = fairwin("promote", "check", str(promoted["window"]), "--policy", str(misspelt), "--to", str(out))
    assert done.returncode == 2 and not out.exists()
    assert done.stderr.strip().endswith(
        "promote.require_metrics: unknown metric(s) 'pooled_rate'; the metrics are "
        "pooled_rate_tps, accepted_per_round, decode_tps, ms_per_round, ttft_s"
    ), done.stderr


def copied(promoted: dict[str, Any], name: str) -> Path:
    copy = promoted["window"].parent / f"{promoted['window'].name}-{name}"
    shutil.copytree(promoted["window"], copy)
    return copy


def test_a_window_not_complete_or_with_an_edited_decision_or_manifest_is_refused(promoted: dict[str, Any]) -> None:
    failed = copied(promoted, "failed")
    status = json.loads((failed / "status.json").read_text())
    (failed / "status.json").write_text(json.dumps({**status, "state": "failed"}))
    assert check(failed, policy(promoted))[1] == ["the window is failed, not complete"]
    edited = copied(promoted, "edited")
    (edited / "decision.json").write_text((edited / "decision.json").read_text() + " ")
    (reason,) = check(edited, policy(promoted))[1]
    assert reason.startswith("its decision cannot be trusted") and "changed since the window sealed it" in reason
    manifest = copied(promoted, "manifest")
    (manifest / "window.json").write_text((manifest / "window.json").read_text() + " ")
    assert check(manifest, policy(promoted))[1] == [f"{manifest / 'window.json'} changed since the decision sealed it"]


def test_production_not_restored_is_refused(promoted: dict[str, Any]) -> None:
    window = copied(promoted, "restore")
    status = json.loads((window / "status.json").read_text())
    status["restore"] = {"state": "RESTORE FAILED", "reason": "the watch's request 2 was not answered"}
    (window / "status.json").write_text(json.dumps(status))
    assert check(window, policy(promoted))[1] == [
        "production was not restored and watched: RESTORE FAILED: the watch's request 2 was not answered"
    ]


def test_a_receipt_changed_after_the_window_is_refused(promoted: dict[str, Any]) -> None:
    gate = promoted["root"] / "gate.json"
    kept = gate.read_text()
    try:
        gate.write_text(kept.replace('"PASS"', '"FAIL"'))
        corrupt, required = check(promoted["window"], policy(promoted))[1]
        assert corrupt.startswith("gate receipt:") and "does not match its contents" in corrupt
        assert required == "gate rng: no PASS receipt was given to the window (--require-gate)"
    finally:
        gate.write_text(kept)


def evidence_reasons(promoted: dict[str, Any], **decision_changes: Any) -> list[str]:
    """The checks on the window's own evidence with its decision changed as a window could have decided."""
    found, _ = gather(WindowDir.at(promoted["window"]))
    assert found.decision is not None
    found.decision = found.decision.model_copy(update=decision_changes)
    rules = [{"id": found.decision.rule_id, "sha256": found.decision.rule_sha256}]
    settings = PromotionPolicy.model_validate({"rules": rules, "require_gates": ["rng"]})
    return [reason for _, run in CHECKS for reason in run(found, settings)]


def test_a_verdict_other_than_win_a_failed_guard_or_a_real_greedy_divergence_is_refused(
    promoted: dict[str, Any],
) -> None:
    found, _ = gather(WindowDir.at(promoted["window"]))
    assert found.decision is not None and found.decision.greedy is not None
    assert evidence_reasons(promoted, verdict="NEUTRAL") == ["the verdict is NEUTRAL, not WIN"]
    cell = found.decision.cells[0]
    guard = cell.guards[0].model_copy(update={"failed": True, "detail": "below both controls in repeats 1, 2"})
    cells = [cell.model_copy(update={"guards": [guard, *cell.guards[1:]]}), *found.decision.cells[1:]]
    assert evidence_reasons(promoted, cells=cells) == [
        f"{cell.cell}: guard {guard.metric} FAILED: below both controls in repeats 1, 2"
    ]
    wrong = Divergence(
        start="s2",
        reference="s1",
        cell=cell.cell,
        prompt="prose/p1",
        position=3,
        expected=" a",
        got=" b",
        margin=2.95,
        near_tie=False,
    )
    greedy = found.decision.greedy.model_copy(update={"divergences": [wrong]})
    assert evidence_reasons(promoted, greedy=greedy) == [
        f"real greedy divergence: s2 against s1, {cell.cell} prose/p1 at position 3: ' a' expected, ' b' written"
    ]
    assert evidence_reasons(promoted, greedy=None) == [
        "greedy diagnostics did not run ([diagnostics.greedy] in the plan)"
    ]


def test_a_window_given_no_qualification_gate_or_rehearsal_is_refused_for_each(
    promoted: dict[str, Any], make_plan: PlanFactory
) -> None:
    plan = make_plan(
        roles={"A": sim_role("--ms-per-round", "4"), "B": sim_role("--ms-per-round", "2")},
        window={"repeats": 2, "warmup_waves_max": 1},
    )
    assert fairwin("run", str(plan), "--quiet").returncode == 0
    (window,) = [p for p in (plan.parent / "windows").iterdir() if p.is_dir() and not p.name.startswith(".")]
    alone = {
        "mode": "controlled",
        "require_gates": [],
        "require_greedy": False,
        "require_restored": False,
        "require_qualification": False,
        "require_rehearsal": False,
    }
    for key, reason in (
        ("require_qualification", "no qualification was given to the window"),
        ("require_rehearsal", "no rehearsal was given to the window"),
        ("require_restored", "the window held no production"),
    ):
        code, reasons, _ = check(window, policy(promoted, **{**alone, key: True}))
        assert code == ANSWER_IS_NO and len(reasons) == 1 and reasons[0].startswith(reason), reasons
    assert check(window, policy(promoted, **alone))[0] == 0
