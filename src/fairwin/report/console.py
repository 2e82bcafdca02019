"""The terminal view: the verdict and a per-cell table, with rich."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fairwin.decision import Decision, MetricResult

VERDICT_STYLE = {
    "WIN": "bold green",
    "LOSS": "bold red",
    "NEUTRAL": "bold yellow",
    "NO-CHANGE": "bold cyan",
    "INCONCLUSIVE": "bold magenta",
}


def _styled(verdict: str) -> str:
    return f"[{VERDICT_STYLE[verdict]}]{verdict}[/]"


def _interval(result: MetricResult | None) -> str:
    if result is None or result.estimate is None:
        return ""
    e = result.estimate
    return f"{e.point_pct:+.2f} [{e.ci_low_pct:+.2f}, {e.ci_high_pct:+.2f}]"


def decision_table(decision: Decision) -> Table:
    rule = decision.rule
    table = Table(title=f"{decision.rule_id}: {rule.primary}, {decision.order}")
    for column in ("cell", "verdict", "control", "candidate", "primary % (interval)", "guards", "checklist"):
        table.add_column(column, justify="left" if column in ("cell", "verdict", "guards") else "right")
    for cell in decision.cells:
        name = cell.cell if cell.decides else f"{cell.cell} (reported)"
        estimate = cell.primary.estimate if cell.primary else None
        guards = " ".join(
            f"{g.metric}:{'FAIL' if g.failed else 'ok' if g.failed is False else '-'}" for g in cell.guards
        )
        if estimate is None:
            table.add_row(name, _styled(cell.verdict), "", "", "; ".join(cell.reasons), guards, "")
            continue
        table.add_row(
            name,
            _styled(cell.verdict),
            f"{estimate.control_mean:.2f}",
            f"{estimate.candidate_mean:.2f}",
            _interval(cell.primary),
            guards,
            cell.checklist_literal.verdict if cell.checklist_literal else "",
        )
    return table


def print_decision(console: Console, decision: Decision) -> None:
    console.print(decision_table(decision))
    for cell in decision.cells:
        if cell.validity is not None and not cell.validity.valid:
            for condition in cell.validity.conditions:
                console.print(f"  {cell.cell}: {condition}", markup=False)
        for note in cell.noise.notes if cell.noise else []:
            console.print(f"  {cell.cell}: {note}", markup=False)
    if decision.primary_source == "client":
        console.print(f"  primary {decision.rule.primary} measured by fairwin's client (no server counters read)")
    console.print(f"verdict: {_styled(decision.verdict)} ({'; '.join(decision.reasons)})")
