"""A sequential window's looks with an injected launcher: it stops when a look settles, or at its budget."""

from __future__ import annotations

import asyncio
import json

import pytest

from fairwin.decision import RULES, WIN2_SEQ_V1, WIN2_SEQ_V2
from fairwin.errors import GateRefused
from fairwin.files import read_jsonl
from fairwin.plan import load_plan
from fairwin.window.run import run_window
from tests.conftest import PlanFactory
from tests.unit.test_window_steps import launcher_recording


def begun(journal: list[dict[str, object]]) -> list[object]:
    return [e["step"] for e in journal if e["event"] == "begin"]


#: The default rule with its one server-counted guard: the look machinery is the subject, not client timing (on a
#: CPU-starved runner the client-timed decode_tps guard is untrusted, and the product then rightly says INCONCLUSIVE).
SERVER_GUARDED = WIN2_SEQ_V2.model_copy(update={"id": "test-seq-server-guarded", "guards": ("accepted_per_round",)})


def test_a_clear_win_stops_at_the_first_look_and_launches_nothing_after(
    make_plan: PlanFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(RULES, SERVER_GUARDED.id, SERVER_GUARDED)
    loaded = load_plan(make_plan(window={"rule": SERVER_GUARDED.id, "repeats": 2}))
    events: list[str] = []
    said: list[str] = []
    result = asyncio.run(
        run_window(loaded, "controlled", launcher=launcher_recording(events), order="control-first", say=said.append)
    )
    assert [e for e in events if e.startswith("launch")] == ["launch A", "launch B", "launch A", "launch B", "launch A"]
    journal = read_jsonl(result.window.journal)
    assert begun(journal) == [
        "open",
        "start s1",
        "start s2",
        "start s3",
        "start s4",
        "start s5",
        "look after s5",
        "decide",
        "archive",
        "budget",
        "close",
    ]
    # B is clearly faster: WIN at the first look, and nothing launched after.
    verdict = result.decision.verdict
    (cell,) = result.decision.cells
    assert verdict == "WIN", cell.reasons
    assert cell.primary is not None and cell.primary.estimate is not None and cell.primary.estimate.point_pct > 2.0
    assert result.decision.sequential is not None
    assert (result.decision.sequential.ended, result.decision.sequential.starts_used) == ("decided", 5)
    assert any(line.startswith(f"look after s5: {verdict}") for line in said), said
    assert any(
        line.startswith(f"decided {verdict} after 5 of at most 9 starts; 4 starts of hold (about ") for line in said
    )
    budget = json.loads((result.window.path / "budget.json").read_text())
    assert budget["estimate"]["first_look"] == 5 and len(budget["estimate"]["per_start_s"]) == 9


# Its one guard is a server counter: the client-timed decode_tps guard is left out, since on a CPU-starved runner
# its untrusted timing makes a look INCONCLUSIVE (a full run once stopped this window so), and the budget is the
# subject here.
NEVER = WIN2_SEQ_V1.model_copy(
    update={
        "id": "test-seq-never",
        "look_levels": (1e-6,) * 4,
        "equivalence_levels": (1e-6,) * 4,
        "guards": ("accepted_per_round",),
    }
)


def test_the_budget_stops_a_window_no_look_settled(make_plan: PlanFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # A rule whose looks never cross, and a budget whose estimate (nearly free starts) admits the first look while
    # the starts really take seconds: after s5 the next pair would end the measurement past its 0.02 min.
    monkeypatch.setitem(RULES, NEVER.id, NEVER)
    path = make_plan(window={"rule": NEVER.id, "repeats": 2})
    path.write_text(
        path.read_text().replace(
            "startup_s = 1\nstop_s = 1\ndecode_ms_per_token = 2",
            "startup_s = 0\nstop_s = 0\ndecode_ms_per_token = 0.001\nprefill_ms_per_token = 0\n"
            "measurement_limit_min = 0.02",
        )
    )
    loaded = load_plan(path)
    result = asyncio.run(run_window(loaded, "controlled", launcher=launcher_recording([]), order="control-first"))
    journal = read_jsonl(result.window.journal)
    assert begun(journal)[5:8] == ["start s5", "look after s5", "decide"]
    (look,) = [e for e in journal if e["step"] == "look after s5" and e["event"] == "end"]
    assert look["verdict"] == "CONTINUE", (look, [c.reasons for c in result.decision.cells])
    assert str(look["stopped"]).startswith("the budget: s6 and s7 would end the measurement at ")
    assert str(look["stopped"]).endswith(" min, past its 0.02 min limit")
    stopping = result.decision.sequential
    assert stopping is not None and (stopping.ended, stopping.starts_used) == ("budget", 5)
    assert stopping.stop_reason == look["stopped"] and result.decision.verdict == "NEUTRAL"
    assert "stopped at the budget after 5 of 9 starts: NEUTRAL" in result.decision.reasons
    context = json.loads((result.window.path / "context.json").read_text())
    assert context["stop_reason"] == look["stopped"]


def test_max_starts_stops_a_window_no_look_settled_after_its_first_look(
    make_plan: PlanFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(RULES, NEVER.id, NEVER)
    path = make_plan(window={"rule": NEVER.id, "repeats": 2})
    path.write_text(path.read_text().replace("decode_ms_per_token = 2", "decode_ms_per_token = 2\nmax_starts = 7"))
    events: list[str] = []
    result = asyncio.run(run_window(load_plan(path), "controlled", launcher=launcher_recording(events)))
    assert len([e for e in events if e.startswith("launch")]) == 7  # the looks after 5 and 7; never s8 or s9
    journal = read_jsonl(result.window.journal)
    assert begun(journal)[5:11] == ["start s5", "look after s5", "start s6", "start s7", "look after s7", "decide"]
    (look,) = [e for e in journal if e["step"] == "look after s7" and e["event"] == "end"]
    assert look["stopped"] == "the budget: 7 starts at most (max_starts)"
    stopping = result.decision.sequential
    assert stopping is not None and (stopping.ended, stopping.starts_used, stopping.max_starts) == ("budget", 7, 9)
    assert result.decision.verdict == "NEUTRAL"
    budget = json.loads((result.window.path / "budget.json").read_text())
    assert len(budget["estimate"]["per_start_s"]) == 7  # the estimate's maximum is the budget's


def test_max_starts_below_the_rules_first_look_is_refused_before_anything_starts(make_plan: PlanFactory) -> None:
    path = make_plan(window={"rule": None, "repeats": 2})
    path.write_text(path.read_text().replace("decode_ms_per_token = 2", "decode_ms_per_token = 2\nmax_starts = 4"))
    events: list[str] = []
    with pytest.raises(GateRefused) as refused:
        asyncio.run(run_window(load_plan(path), "controlled", launcher=launcher_recording(events)))
    assert str(refused.value).startswith("max_starts is 4, but rule win2-seq-v2: its first look comes after 5")
    assert str(refused.value).endswith("raise max_starts in [budget] to at least 5 (refused by the budget check)")
    assert events == []
