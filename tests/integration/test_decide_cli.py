"""decide, rules and archive, as a user runs them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fairwin.decision import WIN2_V1
from tests.conftest import PlanFactory
from tests.integration.helpers import fairwin

DOCS = Path(__file__).resolve().parents[2] / "docs" / "decision.md"


def docs_rows(tmp_path: Path) -> Path:
    block = re.search(r"```jsonl\n(.*?)```", DOCS.read_text(), re.S)
    assert block is not None
    path = tmp_path / "rows.jsonl"
    path.write_text(block.group(1))
    return path


def test_the_documented_example_gives_the_documented_decision(tmp_path: Path) -> None:
    done = fairwin(
        "decide", "--pooled", str(docs_rows(tmp_path)), "--mode", "controlled", "--rule", "win2-v1", "--json"
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["format"] == "fairwin.decisions/1" and printed["notes"] == []
    (doc,) = printed["decisions"]
    assert doc["format"] == "fairwin.decision/4" and doc["verdict"] == "WIN"
    cell = doc["cells"][0]
    estimate = cell["primary"]["estimate"]
    assert estimate["control"] == [100.5, 99.5, 100.5] and estimate["deltas"] == [5.5, 5.5, 6.0]
    assert (round(estimate["point_pct"], 2), round(estimate["ci_low_pct"], 2), round(estimate["ci_high_pct"], 2)) == (
        5.66,
        4.94,
        6.37,
    )
    assert [g["failed"] for g in cell["guards"]] == [False, False]
    assert cell["checklist_literal"]["verdict"] == "LOSS"
    assert doc["rule_sha256"] == WIN2_V1.sha256


def test_two_rules_side_by_side(tmp_path: Path) -> None:
    two_rules = ["decide", "--pooled", str(docs_rows(tmp_path)), "--mode", "controlled"]
    two_rules += ["--rule", "win2-v1", "--rule", "win2-launch-v1"]
    done = fairwin(*two_rules, "--json")
    assert done.returncode == 0, done.stderr
    docs = json.loads(done.stdout)["decisions"]
    assert [(d["rule_id"], d["verdict"]) for d in docs] == [("win2-v1", "WIN"), ("win2-launch-v1", "NEUTRAL")]
    table = fairwin(*two_rules)
    assert "verdict: WIN" in table.stdout and "verdict: NEUTRAL" in table.stdout


def test_pooled_rows_of_a_bracket_under_the_default_rule_are_decided_as_the_api_decides_them(tmp_path: Path) -> None:
    import fairwin as library
    from fairwin.verdict.pooled_file import load_pooled

    rows = docs_rows(tmp_path)
    done = fairwin("decide", "--pooled", str(rows), "--mode", "controlled", "--json")
    assert done.returncode == 0, done.stderr
    (printed,) = json.loads(done.stdout)["decisions"]
    cells = list(dict.fromkeys(row.cell for row in load_pooled(rows)))
    context = library.WindowContext(window_id=rows.stem, mode="controlled", cells=cells)
    api = library.decide(load_pooled(rows), rule=library.get_rule(None), context=context)
    assert (printed["rule_id"], printed["verdict"]) == (api.rule_id, api.verdict) == ("win2-seq-v2", "INCONCLUSIVE")
    assert printed["sequential"]["starts_used"] == api.sequential.starts_used == 3  # type: ignore[union-attr]
    assert "fewer than the default rule win2-seq-v2's first look without an archive (5)" in done.stderr
    assert "win2-launch-v1, win2-v1 decide 3 starts: name one with --rule" in done.stderr


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"start": "S1", "cell": "c", "repeat": 1}', ":1: start: Value error, a start is named s1, s2, ..."),
        ('{"start": "s1", "repeat": 1}', ":1: cell: Field required"),
        ('{"start": "s1", "cell": "c", "repeat": 0}', ":1: repeat: Input should be greater than or equal to 1"),
        ("not json", ":1: (row): Invalid JSON"),
    ],
)
def test_bad_pooled_rows_are_one_line_errors(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(line + "\n")
    done = fairwin("decide", "--pooled", str(path), "--mode", "controlled")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


def test_usage_errors(tmp_path: Path) -> None:
    assert "needs --mode" in fairwin("decide", "--pooled", str(docs_rows(tmp_path))).stderr
    assert "no registered rule 'nope'" in fairwin("rules", "show", "nope").stderr
    audit = fairwin("rules", "audit", "win2-v1")
    assert audit.returncode == 2 and "--cv PCT or --noise-from ARCHIVE" in audit.stderr


def test_rules_list_show_and_audit() -> None:
    listed = fairwin("rules", "list")
    assert "win2-v1" in listed.stdout and "win2-launch-v1" in listed.stdout
    shown = json.loads(fairwin("rules", "show", "win2-v1").stdout)
    assert shown["sha256"] == WIN2_V1.sha256 and shown["bar_pct"] == 2.0 and shown["guard_fail_repeats"] == 2
    done = fairwin("rules", "audit", "win2-v1", "--cv", "1", "--trials", "300", "--effect", "5", "--json")
    assert done.returncode == 0, done.stderr
    audit = json.loads(done.stdout)
    assert set(audit["no_change"]["guard_failure_rates"]) == {"accepted_per_round", "decode_tps"}
    assert audit["effect"]["power"] is not None
    table = fairwin("rules", "audit", "win2-v1", "--cv", "1", "--trials", "300")
    assert "false LOSS (no change)" in table.stdout and "guard accepted_per_round fails" in table.stdout


def test_a_failed_window_is_not_decided(make_plan: PlanFactory) -> None:
    from tests.conftest import sim_role

    role = sim_role("--fault", "no-metrics", model="dec-fail")
    plan = make_plan(roles={"A": role, "B": role})
    assert fairwin("run", str(plan), "--mode", "controlled", "--quiet").returncode == 3
    (window,) = [p for p in (plan.parent / "windows").iterdir() if p.is_dir()]
    done = fairwin("decide", str(window))
    assert done.returncode == 2 and "is 'failed', not complete" in done.stderr
