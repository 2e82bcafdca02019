"""One cell's rows arranged by start and repeat, and the checks every rule makes first."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fairwin.decision.inputs import ORDERS, DecisionRow

STARTS = ("s1", "s2", "s3")
#: Metrics timed by the client; a row's ``client_problem`` says why they are unobserved.
CLIENT_METRICS = ("decode_tps", "ttft_s")


@dataclass(frozen=True)
class CellTable:
    cell: str
    rows: dict[str, dict[int, DecisionRow]]  # start -> repeat -> row
    repeats: list[int]  # complete in all three starts
    order: str  # control-first | candidate-first
    problems: list[str]

    def values(self, start: str, metric: str) -> list[float | None]:
        return [getattr(self.rows[start][r], metric) for r in self.repeats]

    def missing(self, metric: str) -> bool:
        return any(v is None or not math.isfinite(v) for s in STARTS for v in self.values(s, metric))

    def why_missing(self, metric: str) -> str:
        """Where ``metric`` is unobserved, and the first cause a row gives (untrusted client timing)."""
        where, causes = [], []
        for start in STARTS:
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
        """(s1, s2, s3) as arrays over the complete repeats; call only when not missing()."""
        return self.series("s1", metric), self.series("s2", metric), self.series("s3", metric)

    def control_candidate(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """Per repeat: the bracketing pair's mean is one side, the middle start the other."""
        first, middle, last = self.bracket(metric)
        outer = (first + last) / 2.0
        return (outer, middle) if self.order == "control-first" else (middle, outer)


def arrange(rows: Sequence[DecisionRow], cell: str, declared_order: str) -> CellTable:
    table: dict[str, dict[int, DecisionRow]] = {s: {} for s in STARTS}
    problems: list[str] = []
    for row in rows:
        if row.cell != cell:
            continue
        if row.repeat in table[row.start]:
            problems.append(f"{row.start} repeat {row.repeat} appears twice")
        table[row.start][row.repeat] = row
    repeats = sorted(set.intersection(*(set(table[s]) for s in STARTS)))
    incomplete = sorted(set.union(*(set(table[s]) for s in STARTS)) - set(repeats))
    if incomplete:
        problems.append(f"repeats {incomplete} are missing from some start")
    if len(repeats) < 2:
        problems.append(f"{len(repeats)} complete repeat(s); an interval needs at least 2")
    order = declared_order
    kinds: dict[str, str] = {row.start: row.kind for s in STARTS for row in table[s].values() if row.kind is not None}
    if kinds:
        matching = [
            name for name, expected in ORDERS.items() if all(kinds.get(s, expected[s]) == expected[s] for s in STARTS)
        ]
        if not matching:
            problems.append(f"starts' kinds {kinds} are not a bracket (s1 and s3 must match, s2 differ)")
        elif matching[0] != declared_order:
            order = matching[0]
    return CellTable(cell=cell, rows=table, repeats=repeats, order=order, problems=problems)


def off_off_spread_pct(table: CellTable, metric: str) -> list[float]:
    """Per repeat, |s1 - s3| / mean(s1, s3): how far the bracketing pair disagrees."""
    first, _, last = table.bracket(metric)
    return [float(x) for x in 100.0 * np.abs(first - last) / ((first + last) / 2.0)]
