"""``fairwin compare``: verdicts and effects across windows (a chain's, or days apart), and whether they agree.

Pure: decisions in, a comparison out. Per decision cell, the windows agree when every
verdict is the same; their effects are consistent when the primary's intervals share
a common range (the largest low at most the smallest high). Both are reported:
windows can agree on NEUTRAL while their intervals do not overlap, which says the
windows measured different things (a drifted baseline, a changed build).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict
from rich.markup import escape
from rich.table import Table

from fairwin.decision import Decision
from fairwin.formats import COMPARISON, RecordFormat
from fairwin.records import Record


class CellAcross(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cell: str
    verdicts: dict[str, str]  # window id -> the cell's verdict
    effects: dict[str, list[float] | None]  # window id -> [point, low, high] % of the primary, None if unmeasured
    agree: bool
    intervals_overlap: bool | None  # None when fewer than two windows measured the primary


class ComparedWindow(BaseModel):
    """One window of a comparison: which it is, how it ran, under which rule and bar, and its verdict."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window_id: str
    mode: str
    order: str
    rule_id: str
    primary: str
    bar_pct: float
    verdict: str


class Comparison(Record):
    """``fairwin.comparison/1``: ``fairwin compare --json``."""

    record_format: ClassVar[RecordFormat] = COMPARISON
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["fairwin.comparison/1"] = "fairwin.comparison/1"
    windows: list[ComparedWindow]
    cells: list[CellAcross]
    agree: bool


def compare(decisions: Sequence[Decision]) -> Comparison:
    windows = [
        ComparedWindow(
            window_id=d.window_id,
            mode=d.mode,
            order=d.order,
            rule_id=d.rule_id,
            primary=d.rule.primary,
            bar_pct=d.rule.bar_pct,
            verdict=d.verdict,
        )
        for d in decisions
    ]
    names = list(dict.fromkeys(c.cell for d in decisions for c in d.cells if c.decides))
    cells = [_across(name, decisions) for name in names]
    return Comparison(windows=windows, cells=cells, agree=all(c.agree for c in cells))


def _across(name: str, decisions: Sequence[Decision]) -> CellAcross:
    verdicts: dict[str, str] = {}
    effects: dict[str, list[float] | None] = {}
    for decision in decisions:
        cell = next((c for c in decision.cells if c.cell == name), None)
        # A cell one window only reported is not that window's call: marked, so the windows do not agree on it.
        verdict = "absent" if cell is None else cell.verdict if cell.decides else f"{cell.verdict} (reported)"
        verdicts[decision.window_id] = verdict
        estimate = cell.primary.estimate if cell is not None and cell.primary is not None else None
        effects[decision.window_id] = (
            [estimate.point_pct, estimate.ci_low_pct, estimate.ci_high_pct] if estimate is not None else None
        )
    measured = [e for e in effects.values() if e is not None]
    overlap = max(e[1] for e in measured) <= min(e[2] for e in measured) if len(measured) > 1 else None
    return CellAcross(
        cell=name, verdicts=verdicts, effects=effects, agree=len(set(verdicts.values())) == 1, intervals_overlap=overlap
    )


def comparison_table(found: Comparison) -> Table:
    """One row per window, one column per decision cell: verdict and the primary's effect with its interval."""
    primary = found.windows[0].primary if found.windows else "primary"
    table = Table(title=escape(f"{len(found.windows)} windows, {primary} effect % [interval]"))
    for column in ("window", "mode", "order", "verdict", *(c.cell for c in found.cells)):
        table.add_column(column)
    for window in found.windows:
        wid = window.window_id
        cells = [_cell_text(c.verdicts[wid], c.effects[wid]) for c in found.cells]
        table.add_row(wid, window.mode, window.order, window.verdict, *(escape(c) for c in cells))
    table.add_row("", "", "", "agree?", *(_agreement(c) for c in found.cells))
    return table


def _cell_text(verdict: str, effect: list[float] | None) -> str:
    if effect is None:
        return verdict
    point, low, high = effect
    return f"{verdict} {point:+.2f} [{low:+.2f}, {high:+.2f}]"


def _agreement(cell: CellAcross) -> str:
    verdicts = "same verdict" if cell.agree else "verdicts differ"
    if cell.intervals_overlap is None:
        return verdicts
    return f"{verdicts}; intervals {'overlap' if cell.intervals_overlap else 'do not overlap'}"
