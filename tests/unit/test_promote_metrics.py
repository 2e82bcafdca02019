"""The promotion's metric check on a stored decision: a required metric the cell never judged refuses, per cell."""

from __future__ import annotations

from pathlib import Path

from fairwin.decision import Decision
from fairwin.directory.manifest import WindowManifest
from fairwin.directory.status import WindowStatus
from fairwin.promote.check import Evidence, _metrics_and_validity
from fairwin.promote.policy import AcceptedRule, PromotionPolicy
from fairwin.records import read_record

STORED = Path(__file__).resolve().parents[1] / "fixtures" / "windows" / "win2-v1"


def evidence(decision: Decision) -> Evidence:
    status = read_record(STORED / "status.json", WindowStatus)
    return Evidence(STORED, status, read_record(STORED / "window.json", WindowManifest), decision)


def test_a_required_metric_the_cell_did_not_judge_refuses_and_one_it_judged_does_not() -> None:
    decision = read_record(STORED / "decision.json", Decision)
    policy = PromotionPolicy(rules=[AcceptedRule(id="win2-v1", sha256="0" * 64)], require_metrics=["ttft_s"])
    assert _metrics_and_validity(evidence(decision), policy) == []
    cell = decision.cells[0]
    unjudged = [r.model_copy(update={"estimate": None}) if r.metric == "ttft_s" else r for r in cell.reported]
    decision = decision.model_copy(update={"cells": [cell.model_copy(update={"reported": unjudged})]})
    assert _metrics_and_validity(evidence(decision), policy) == [f"{cell.cell}: ttft_s was not recorded"]
