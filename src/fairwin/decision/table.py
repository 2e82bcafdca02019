"""One cell's rows arranged by start and repeat, and the checks every rule makes first."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairwin.rows import BRACKET_STARTS, CLIENT_METRICS, ORDER_NAMES, DecisionRow, Kind, order_kinds, start_names


@dataclass(frozen=True)
class CellTable:
    cell: str
    rows: dict[str, dict[int, DecisionRow]]  # start -> repeat -> row
    repeats: list[int]  # complete in every start
    order: str  # control-first | candidate-first
    problems: list[str]

    @property
    def starts(self) -> tuple[str, ...]:
        return tuple(self.rows)

    @property
    def kinds(self) -> dict[str, Kind]:
        return order_kinds(self.order, len(self.rows))

    def values(self, start: str, metric: str) -> list[float | None]:
        return [getattr(self.rows[start][r], metric) for r in self.repeats]

    def missing(self, metric: str) -> bool:
        return any(v is None or not math.isfinite(v) for s in self.starts for v in self.values(s, metric))

    def why_missing(self, metric: str) -> str:
        """Where ``metric`` is unobserved, and the first cause a row gives (untrusted client timing)."""
        where, causes = [], []
        for start in self.starts:
            for repeat in self.repeats:
                row = self.rows[start][repeat]
                value = getattr(row, metric)
                if value is None or not math.isfinite(value):
                    where.append(f"{start} repeat {repeat}")
                    if row.client_problem and metric in CLIENT_METRICS:
                        causes.append(f"{start} repeat {repeat}: {row.client_problem}")
        cause = f" ({causes[0]}{'; and likewise elsewhere' if len(causes) > 1 else ''})" if causes else ""
        return f"{metric} unobserved in {', '.join(where)}{cause}"

    def series(self, start: str, metric: str) -> np.ndarray:
        return np.asarray([float(v) for v in self.values(start, metric) if v is not None], dtype=float)

    def bracket(self, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(s1, s2, s3) as arrays over the complete repeats; call only when not missing() on a 3-start table."""
        return self.series("s1", metric), self.series("s2", metric), self.series("s3", metric)

    def matrix(self, metric: str) -> np.ndarray:
        """Starts x complete repeats, in run order; call only when not missing()."""
        return np.vstack([self.series(start, metric) for start in self.starts])

    def control_candidate(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """Per repeat: the mean of the control starts, and of the candidate starts.

        In a bracket that is the bracketing pair's mean against the middle start.
        """
        values, kinds = self.matrix(metric), list(self.kinds.values())
        control = values[[k == "control" for k in kinds]].mean(axis=0)
        candidate = values[[k == "candidate" for k in kinds]].mean(axis=0)
        return control, candidate


def arrange(rows: Sequence[DecisionRow], cell: str, declared_order: str, count: int = BRACKET_STARTS) -> CellTable:
    """The cell's rows by start and repeat, for a window of ``count`` starts (the rule's)."""
    names = start_names(count)
    table: dict[str, dict[int, DecisionRow]] = {s: {} for s in names}
    problems: list[str] = []
    ran = sorted({row.start for row in rows}, key=lambda s: int(s[1:]))
    if set(ran) - set(names):
        problems.append(
            f"the rows come from {len(ran)} starts ({ran[0]} to {ran[-1]}); the rule registers {count} per window"
        )
    elif ran and len(ran) < count:
        problems.append(f"start(s) {', '.join(s for s in names if s not in ran)} have no rows")
    for row in rows:
        if row.cell != cell or row.start not in table:
            continue
        if row.repeat in table[row.start]:
            problems.append(f"{row.start} repeat {row.repeat} appears twice")
        table[row.start][row.repeat] = row
    repeats = sorted(set.intersection(*(set(table[s]) for s in names)))
    incomplete = sorted(set.union(*(set(table[s]) for s in names)) - set(repeats))
    if incomplete:
        problems.append(f"repeats {incomplete} are missing from some start")
    if len(repeats) < 2:
        problems.append(f"{len(repeats)} complete repeat(s); an interval needs at least 2")
    order = declared_order
    kinds = {row.start: row.kind for s in names for row in table[s].values() if row.kind is not None}
    if kinds:
        matching = [o for o in ORDER_NAMES if all(order_kinds(o, count)[s] == k for s, k in kinds.items())]
        if not matching:
            problems.append(f"starts' kinds {kinds} do not alternate (control and candidate, turn about)")
        elif matching[0] != declared_order:
            order = matching[0]
    return CellTable(cell=cell, rows=table, repeats=repeats, order=order, problems=problems)


def off_off_spread_pct(table: CellTable, metric: str) -> list[float]:
    """Per repeat, how far the starts of the first start's kind disagree: (max - min) / mean.

    In a bracket that is |s1 - s3| / mean(s1, s3), the bracketing pair.
    """
    values, kinds = table.matrix(metric), list(table.kinds.values())
    outer = values[[k == kinds[0] for k in kinds]]
    return [float(x) for x in 100.0 * np.ptp(outer, axis=0) / outer.mean(axis=0)]
