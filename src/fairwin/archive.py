"""The control archive: every finished window's control starts, kept forever.

One JSONL row (``fairwin.archive/1``) per control start x cell, appended under a
lock and fsynced; earlier rows are never rewritten. A torn line from a crashed writer
is reported by every reader, never silently dropped. The archive's spread of a
metric across control starts (launch to launch, day to day) is what the decision
sets next to the bar.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from fairwin.decision.inputs import ArchiveNoise
from fairwin.durable import append_jsonl, scan_jsonl
from fairwin.errors import InputError
from fairwin.vocabulary import ARCHIVE, METRICS, MetricValues


class ArchivedRepeat(MetricValues):
    repeat: int


class ArchiveRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # ARCHIVE.id spelt out (a Literal needs one): a row of another version is reported, not used.
    format: Literal["fairwin.archive/1"] = "fairwin.archive/1"
    window_id: str
    time: float
    commit: str | None
    mode: str
    role: str
    start: str
    cell: str
    max_tokens: int
    clock_cap_mhz: float | None
    repeats: list[ArchivedRepeat]

    def mean(self, metric: str) -> float | None:
        values = [v for r in self.repeats if (v := getattr(r, metric)) is not None]
        return float(np.mean(values)) if values else None


def append_controls(path: Path, rows: Sequence[ArchiveRow]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    append_jsonl(path, rows)


def control_rows(
    *,
    window_id: str,
    commit: str | None,
    mode: str,
    control_starts: dict[str, str],
    max_tokens: dict[str, int],
    pooled: Sequence[dict[str, Any]],
) -> list[ArchiveRow]:
    """Archive rows for a window's control starts (``control_starts``: start -> role)."""
    now = time.time()
    rows = []
    for start, role in control_starts.items():
        for cell, tokens in max_tokens.items():
            mine = sorted((p for p in pooled if p["start"] == start and p["cell"] == cell), key=lambda p: p["repeat"])
            if not mine:
                continue
            caps = {p.get("clock_cap_mhz") for p in mine}
            rows.append(
                ArchiveRow(
                    window_id=window_id, time=now, commit=commit, mode=mode, role=role, start=start, cell=cell,
                    max_tokens=tokens, clock_cap_mhz=caps.pop() if len(caps) == 1 else None,
                    repeats=[ArchivedRepeat(**{k: p.get(k) for k in ("repeat", *METRICS)}) for p in mine],
                )
            )  # fmt: skip
    return rows


def read_archive(path: Path) -> tuple[list[ArchiveRow], list[str]]:
    """Whole rows, and one problem line for every line that is torn, corrupt or not an archive row."""
    if not path.exists():
        return [], []
    if path.is_dir():
        raise InputError(f"{path} is a directory, not an archive file")
    raw, problems = scan_jsonl(path)
    rows: list[ArchiveRow] = []
    for number, item in enumerate(raw, 1):
        try:
            rows.append(ArchiveRow.model_validate(item))
        except ValidationError as exc:
            problems.append(f"{path}: row {number} is not a {ARCHIVE.id} row ({exc.errors()[0]['msg']}); not used")
    return rows, problems


def select(
    rows: Sequence[ArchiveRow],
    *,
    cell: str,
    commit: str | None = None,
    clock_cap_mhz: float | None = None,
    max_tokens: int | None = None,
) -> list[ArchiveRow]:
    return [
        r
        for r in rows
        if r.cell == cell
        and (commit is None or r.commit == commit)
        and (clock_cap_mhz is None or r.clock_cap_mhz == clock_cap_mhz)
        and (max_tokens is None or r.max_tokens == max_tokens)
    ]


def noise(rows: Sequence[ArchiveRow], cell: str, metric: str, problems: Sequence[str] = ()) -> ArchiveNoise:
    """The spread of ``metric`` across the given control starts (already selected)."""
    means = np.asarray([m for r in rows if (m := r.mean(metric)) is not None], dtype=float)
    within: list[float] = []
    for r in rows:
        values = np.asarray([v for rep in r.repeats if (v := getattr(rep, metric)) is not None], dtype=float)
        if len(values) >= 2:
            within.extend((values - values.mean()).tolist())
    dof = sum(max(0, len([rep for rep in r.repeats if getattr(rep, metric) is not None]) - 1) for r in rows)
    level = float(means.mean()) if len(means) else None
    launch_cv = repeat_cv = spread = None
    if level and len(means) >= 2:
        launch_cv = 100.0 * float(means.std(ddof=1)) / level
        spread = 100.0 * float(np.ptp(means)) / level
    if level and dof > 0:
        repeat_cv = 100.0 * float(np.sqrt(np.sum(np.square(within)) / dof)) / level
    return ArchiveNoise(
        metric=metric,
        cell=cell,
        starts=len(means),
        windows=len({r.window_id for r in rows}),
        launch_cv_pct=launch_cv,
        repeat_cv_pct=repeat_cv,
        range_pct=spread,
        problems=list(problems),
    )


def cell_noise(path: Path, cell: str, metric: str) -> ArchiveNoise:
    """The archive's noise of ``metric`` in ``cell`` over every archived control start, for an audit.

    Lines that are not archive rows are listed in ``problems``; an archive with no control
    start measured in repeats for the cell is an :class:`InputError`.
    """
    if not path.exists():
        raise InputError(f"{path}: no archive there; finished windows append to it")
    rows, problems = read_archive(path)
    found = noise(select(rows, cell=cell), cell, metric, problems)
    if found.repeat_cv_pct is None:
        raise InputError(f"{path}: no archived control starts with repeats for cell {cell!r}")
    return found
