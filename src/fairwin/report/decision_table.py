"""The decision's per-cell table: one model, rendered for the terminal (rich) and for summary.md (and so report.html).

Every view of a window's decision shows the same columns with the same words: a value that is
not there is ``n/a``, a guard or metric the rule could not judge is ``not judged``. Below 100
columns the terminal drops the checklist column (it never decides) and each guard takes its own
line, so the interval and the guards are never cut.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table

from fairwin.decision import CellDecision, Decision, MetricResult

NO_VALUE = "n/a"
NOT_JUDGED = "not judged"
#: Below this many columns the terminal's table leaves the checklist column out.
NARROW_COLUMNS = 100

VERDICT_STYLE = {
    "WIN": "bold green",
    "LOSS": "bold red",
    "NEUTRAL": "bold yellow",
    "NO-CHANGE": "bold cyan",
    "INCONCLUSIVE": "bold magenta",
}


def styled(verdict: str) -> str:
    """A verdict in its terminal colour (rich markup)."""
    return f"[{VERDICT_STYLE[verdict]}]{verdict}[/]"


def interval_parts(result: MetricResult | None) -> tuple[str, str]:
    """(``+3.21 %``, ``[+1.02, +5.40]``); ``not judged`` and nothing when the rule had no estimate."""
    if result is None or result.estimate is None:
        return NOT_JUDGED, ""
    e = result.estimate
    return f"{e.point_pct:+.2f} %", f"[{e.ci_low_pct:+.2f}, {e.ci_high_pct:+.2f}]"


def interval(result: MetricResult | None) -> str:
    """``+3.21 % [+1.02, +5.40]``; ``not judged`` when the rule had no estimate."""
    return " ".join(part for part in interval_parts(result) if part)


@dataclass(frozen=True)
class CellRow:
    """One cell of the table, every value already in words."""

    cell: str
    decides: bool
    verdict: str
    control: str
    candidate: str
    primary: tuple[str, str]  # the point and the interval; a cell with no estimate: why, and nothing
    guards: tuple[str, ...]  # "decode_tps ok", "ttft_s FAIL", "accepted_per_round not judged"
    checklist: str
    arm: str | None = None  # a many-arm window's candidate

    @property
    def primary_text(self) -> str:
        """The point and its interval on one line."""
        return " ".join(part for part in self.primary if part)

    @classmethod
    def of(cls, cell: CellDecision, arm: str | None = None) -> CellRow:
        estimate = cell.primary.estimate if cell.primary is not None else None
        # A cell with no estimate says why in the primary's column: the reason is the result.
        primary = interval_parts(cell.primary) if estimate is not None else ("; ".join(cell.reasons) or NOT_JUDGED, "")
        return cls(
            cell=cell.cell,
            decides=cell.decides,
            verdict=cell.verdict,
            control=f"{estimate.control_mean:.2f}" if estimate is not None else NO_VALUE,
            candidate=f"{estimate.candidate_mean:.2f}" if estimate is not None else NO_VALUE,
            primary=primary,
            guards=tuple(
                f"{g.metric} {'FAIL' if g.failed else 'ok' if g.failed is False else NOT_JUDGED}" for g in cell.guards
            ),
            checklist=cell.checklist_literal.verdict if cell.checklist_literal is not None else NO_VALUE,
            arm=arm,
        )


def rows(decision: Decision) -> list[CellRow]:
    """Every cell's row; a many-arm window's, every candidate's cells, each at the look that settled it."""
    if decision.arms is not None:
        return [CellRow.of(cell, arm.candidate) for arm in decision.arms.arms for cell in arm.cells]
    return [CellRow.of(cell) for cell in decision.cells]


def title(decision: Decision) -> str:
    """``win2-seq-v2: pooled_rate_tps, control-first``; a many-arm window's: its candidates against the control."""
    if decision.arms is not None:
        return f"{decision.rule_id}: {decision.rule.primary}, {len(decision.arms.candidates)} candidates"
    return f"{decision.rule_id}: {decision.rule.primary}, {decision.order}"


def console_table(decision: Decision, width: int) -> Table:
    """For a terminal ``width`` columns wide; below :data:`NARROW_COLUMNS` each value that has two parts (control
    and candidate, point and interval) takes two lines, each guard its own, and the checklist is left out."""
    table = Table(title=title(decision))
    found = rows(decision)
    if width < NARROW_COLUMNS:
        table.add_column("cell")
        table.add_column("verdict")
        table.add_column("control\ncandidate", justify="right")
        table.add_column("primary %", no_wrap=True)
        longest = max((len(guard.split()[0]) for row in found for guard in row.guards), default=len(NO_VALUE))
        table.add_column("guards", min_width=longest)
        for row in found:
            table.add_row(
                _name(row),
                styled(row.verdict),
                f"{row.control}\n{row.candidate}",
                "\n".join(part for part in row.primary if part),
                "\n".join(row.guards) or NO_VALUE,
            )
        return table
    for column in ("cell", "verdict", "control", "candidate", "primary % (interval)", "guards", "checklist"):
        table.add_column(column, justify="right" if column in ("control", "candidate") else "left")
    for row in found:
        table.add_row(
            _name(row),
            styled(row.verdict),
            row.control,
            row.candidate,
            row.primary_text,
            " ".join(row.guards) or NO_VALUE,
            row.checklist,
        )
    return table


def _name(row: CellRow) -> str:
    cell = row.cell if row.decides else f"{row.cell} (reported)"
    return f"{row.arm}: {cell}" if row.arm else cell


def markdown_table(decision: Decision) -> list[str]:
    lines = [
        "| cell | decides | verdict | control | candidate | primary % [interval] | guards | checklist_literal |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows(decision):
        primary, guards = row.primary_text, ", ".join(row.guards) or NO_VALUE
        name = _name(row) if row.arm else row.cell
        lines.append(
            f"| {name} | {'yes' if row.decides else 'reported'} | **{row.verdict}** | {row.control} | "
            f"{row.candidate} | {primary} | {guards} | {row.checklist} |"
        )
    return lines
