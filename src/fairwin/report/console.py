"""The terminal view: the per-cell table (report/decision_table.py), what made a cell invalid, and the verdict."""

from __future__ import annotations

from rich.console import Console

from fairwin.decision import Decision
from fairwin.report.decision_table import console_table, styled


def print_decision(console: Console, decision: Decision) -> None:
    console.print(console_table(decision, console.width))
    for cell in decision.cells:
        if cell.validity is not None and not cell.validity.valid:
            for condition in cell.validity.conditions:
                console.print(f"  {cell.cell}: {condition}", markup=False)
        for note in cell.noise.notes if cell.noise else []:
            console.print(f"  {cell.cell}: {note}", markup=False)
    if decision.primary_source == "client":
        console.print(f"  primary {decision.rule.primary} measured by fairwin's client (no server counters read)")
    console.print(f"verdict: {styled(decision.verdict)} ({'; '.join(decision.reasons)})")
