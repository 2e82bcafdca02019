"""Exports for a team's notebooks: pooled rows and decisions of complete windows, as CSV or Parquet.

``pooled`` is every pooled row (``fairwin.pooled/1``, one per start, cell and repeat)
of the windows, as stored. ``decisions`` is one row per window and cell: the window's
verdict, the cell's, the primary's effect and interval, the means, and which guards
failed. Both are written atomically (pyarrow's writers into memory, then one rename).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fairwin.directory.layout import WindowDir
from fairwin.errors import MissingExtraError

try:
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pa_parquet
except ModuleNotFoundError as exc:  # an extra: only `fairwin export` reads it
    raise MissingExtraError("export", exc.name) from None

from fairwin.decision import Decision
from fairwin.files import write_bytes_atomic
from fairwin.records import read_records
from fairwin.rows import PooledRow

FORMATS = ("csv", "parquet")


def decision_rows(decision: Decision) -> list[dict[str, Any]]:
    rows = []
    for cell in decision.cells:
        estimate = cell.primary.estimate if cell.primary is not None else None
        rows.append(
            {
                "window_id": decision.window_id,
                "mode": decision.mode,
                "order": decision.order,
                "rule_id": decision.rule_id,
                "rule_sha256": decision.rule_sha256,
                "window_verdict": decision.verdict,
                "cell": cell.cell,
                "decides": cell.decides,
                "verdict": cell.verdict,
                "primary": decision.rule.primary,
                "effect_pct": estimate.point_pct if estimate else None,
                "ci_low_pct": estimate.ci_low_pct if estimate else None,
                "ci_high_pct": estimate.ci_high_pct if estimate else None,
                "control_mean": estimate.control_mean if estimate else None,
                "candidate_mean": estimate.candidate_mean if estimate else None,
                "repeats": estimate.n if estimate else None,
                "guards_failed": ",".join(g.metric for g in cell.guards if g.failed),
                "reasons": "; ".join(cell.reasons),
            }
        )
    return rows


def _table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    """Every key of every row a column (rows of older formats lack newer keys: those cells are null)."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    return pa.Table.from_pylist([{key: row.get(key) for key in columns} for row in rows])


def _write(table: pa.Table, path: Path, kind: str) -> None:
    sink = pa.BufferOutputStream()
    if kind == "csv":
        pa_csv.write_csv(table, sink)
    else:
        pa_parquet.write_table(table, sink)
    write_bytes_atomic(path, sink.getvalue().to_pybytes())


def export(windows: Sequence[tuple[Path, Decision]], out_dir: Path, kinds: Sequence[str]) -> list[Path]:
    """``pooled.EXT`` and ``decisions.EXT`` for each kind (csv, parquet) in ``out_dir``; the paths written."""
    pooled = [
        row.model_dump(mode="json")
        for window, _ in windows
        for row in read_records(WindowDir.at(window).pooled, PooledRow)
    ]
    decisions = [row for _, decision in windows for row in decision_rows(decision)]
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in kinds:
        for name, rows in (("pooled", pooled), ("decisions", decisions)):
            path = out_dir / f"{name}.{kind}"
            _write(_table(rows), path, kind)
            written.append(path)
    return written
