"""The terminal view: the verdict and a per-cell table, with rich."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fairwin.decision import Decision

VERDICT_STYLE = {
    "WIN": "bold green",
    "LOSS": "bold red",
    "NEUTRAL": "bold yellow",
    "INCONCLUSIVE": "bold magenta",
}


def decision_table(decision: Decision) -> Table:
    table = Table(title=f"{decision.rule_id}: {decision.rule.primary}, paired by repeat")
    for column in ("cell", "verdict", "control", "candidate", "point %", "interval %"):
        table.add_column(column, justify="left" if column in ("cell", "verdict") else "right")
    for cell in decision.cells:
        name = cell.cell if cell.decides else f"{cell.cell} (reported)"
        verdict = f"[{VERDICT_STYLE[cell.verdict]}]{cell.verdict}[/]"
        p = cell.primary
        if p is None:
            table.add_row(name, verdict, "", "", "", "; ".join(cell.reasons))
        else:
            table.add_row(
                name,
                verdict,
                f"{p.control_mean:.2f}",
                f"{p.candidate_mean:.2f}",
                f"{p.point_pct:+.2f}",
                f"[{p.ci_low_pct:+.2f}, {p.ci_high_pct:+.2f}]",
            )
    return table


def print_decision(console: Console, decision: Decision) -> None:
    console.print(decision_table(decision))
    style = VERDICT_STYLE[decision.verdict]
    console.print(f"verdict: [{style}]{decision.verdict}[/] ({'; '.join(decision.reasons)})")
