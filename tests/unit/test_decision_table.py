"""One decision table, rendered for the terminal (wide and narrow) and for summary.md, with one word for each gap."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from fairwin.decision import Decision
from fairwin.records import read_record
from fairwin.report.decision_table import console_table, markdown_table, rows

STORED = Path(__file__).resolve().parents[1] / "fixtures" / "windows"


def rendered(decision: Decision, width: int) -> list[str]:
    console = Console(width=width, color_system=None, record=True)
    console.print(console_table(decision, width))
    return console.export_text().splitlines()


def test_a_guard_the_rule_could_not_judge_is_not_judged_in_every_view() -> None:
    decision = read_record(STORED / "win2-seq-v1" / "decision.json", Decision)
    (row,) = rows(decision)
    assert row.guards == ("accepted_per_round not judged", "decode_tps ok")
    assert row.primary == ("+3.45 %", "[+2.94, +3.96]")
    assert markdown_table(decision)[2] == (
        "| c | yes | **WIN** | 334.14 | 345.67 | +3.45 % [+2.94, +3.96] | accepted_per_round not judged, decode_tps ok "
        "| INCONCLUSIVE |"
    )
    wide = "\n".join(rendered(decision, 130))
    assert "+3.45 % [+2.94, +3.96]" in wide and "accepted_per_round not judged decode_tps ok" in wide
    assert "checklist" in wide and "INCONCLUSIVE" in wide


def test_in_80_columns_nothing_is_cut_and_the_checklist_is_left_out() -> None:
    for name in ("win2-seq-v1", "win2-v1", "win2-launch-v1", "win2-alt7-v1"):
        decision = read_record(STORED / name / "decision.json", Decision)
        lines = rendered(decision, 80)
        assert max(len(line) for line in lines) <= 80, "\n".join(lines)
        text = "\n".join(lines)
        assert "checklist" not in text
        for row in rows(decision):
            assert all(part in text for part in row.primary if part), text  # the interval whole, on its own line
            assert all(guard.split()[0] in text for guard in row.guards), text  # each guard's metric unbroken
