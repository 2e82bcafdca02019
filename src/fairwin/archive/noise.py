"""What the archive says about noise: rows chosen by key, their spread, and the spread per key.

Pure functions over rows already read (one snapshot), so both backends answer the same
question the same way, bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fairwin.archive.archive_row import ArchiveKey, ArchiveRow
from fairwin.decision.inputs import ArchiveNoise, archive_spreads

#: The keys a selection may name; a key left out matches anything.
KEY_FIELDS = tuple(ArchiveKey.__dataclass_fields__)


def select(rows: Sequence[ArchiveRow], match: Mapping[str, Any]) -> list[ArchiveRow]:
    """The rows whose key has exactly these values (``None`` included: an unknown matches only unknown)."""
    unknown = set(match) - set(KEY_FIELDS)
    if unknown:
        raise ValueError(f"not archive keys: {sorted(unknown)}")
    return [row for row in rows if all(getattr(row.key(), name) == value for name, value in match.items())]


def noise(rows: Sequence[ArchiveRow], cell: str, metric: str, problems: Sequence[str] = ()) -> ArchiveNoise:
    """The spread of ``metric`` across the given control starts (already selected)."""
    means = np.asarray([m for r in rows if (m := r.mean(metric)) is not None], dtype=float)
    within: list[float] = []
    for r in rows:
        values = np.asarray([v for rep in r.repeats if (v := getattr(rep, metric)) is not None], dtype=float)
        if len(values) >= 2:
            within.extend((values - values.mean()).tolist())
    dof = sum(max(0, len([rep for rep in r.repeats if getattr(rep, metric) is not None]) - 1) for r in rows)
    launch_cv, repeat_cv, spread = archive_spreads(means, within, dof)
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


def groups(rows: Sequence[ArchiveRow]) -> dict[ArchiveKey, list[ArchiveRow]]:
    """The rows by key, in the order each key first appears: each group is one comparable noise."""
    found: dict[ArchiveKey, list[ArchiveRow]] = {}
    for row in rows:
        found.setdefault(row.key(), []).append(row)
    return found
