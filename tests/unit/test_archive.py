from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from fairwin.archive import ArchivedRepeat, ArchiveRow, append_controls, noise, read_archive, select


def row(window: str, start: str, values: list[float], cell: str = "c", commit: str = "abc", cap: float | None = None,
        max_tokens: int = 512) -> ArchiveRow:  # fmt: skip
    return ArchiveRow(
        window_id=window, time=0.0, commit=commit, mode="controlled", role="A", start=start, cell=cell,
        max_tokens=max_tokens, clock_cap_mhz=cap,
        repeats=[ArchivedRepeat(repeat=i, pooled_rate_tps=v) for i, v in enumerate(values, 1)],
    )  # fmt: skip


def test_noise_by_hand() -> None:
    rows = [row("w1", "s1", [99, 101]), row("w1", "s3", [101, 103]), row("w2", "s1", [104, 106])]
    result = noise(rows, "c", "pooled_rate_tps")
    means = np.array([100.0, 102.0, 105.0])
    assert result.starts == 3 and result.windows == 2
    assert result.launch_cv_pct == pytest.approx(100 * means.std(ddof=1) / means.mean())
    assert result.range_pct == pytest.approx(100 * 5 / means.mean())
    # Every start's repeats deviate by +-1 around its mean: pooled variance 6 / 3 = 2... per degree of freedom 1.
    assert result.repeat_cv_pct == pytest.approx(100 * math.sqrt(6 / 3) / means.mean())


def test_select_filters_cell_commit_cap_and_tokens() -> None:
    rows = [
        row("w", "s1", [1, 1]),
        row("w", "s1", [1, 1], cell="other"),
        row("w", "s1", [1, 1], commit="def"),
        row("w", "s1", [1, 1], cap=2300),
        row("w", "s1", [1, 1], max_tokens=128),
    ]
    assert len(select(rows, cell="c")) == 4
    assert len(select(rows, cell="c", commit="abc")) == 3
    assert len(select(rows, cell="c", clock_cap_mhz=2300)) == 1
    assert len(select(rows, cell="c", max_tokens=512, commit="abc")) == 2


def test_torn_line_is_reported_kept_and_never_glued_to_the_next_row(tmp_path: Path) -> None:
    path = tmp_path / "archive.jsonl"
    append_controls(path, [row("w1", "s1", [1, 2])])
    with path.open("a") as handle:
        handle.write('{"format": "fairwin.archive/1", "window_id": "w2", "ti')  # a writer died here
    append_controls(path, [row("w3", "s1", [3, 4])])
    rows, problems = read_archive(path)
    assert [r.window_id for r in rows] == ["w1", "w3"]
    assert len(problems) == 1 and "archive.jsonl:2: torn or corrupt line" in problems[0]
    lines = path.read_text().splitlines()
    assert lines[1].endswith('"ti') and len(lines) == 3  # the torn fragment stays, untouched


def test_foreign_rows_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "archive.jsonl"
    path.write_text('{"hello": 1}\n')
    rows, problems = read_archive(path)
    assert rows == [] and "is not a fairwin.archive/1 row" in problems[0]


def test_a_row_of_another_format_version_is_reported_not_used(tmp_path: Path) -> None:
    path = tmp_path / "archive.jsonl"
    row = {"format": "fairwin.archive/2", "window_id": "w", "time": 0.0, "commit": None, "mode": "m", "role": "A",
           "start": "s1", "cell": "c", "max_tokens": 8, "clock_cap_mhz": None, "repeats": []}  # fmt: skip
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, "format": "fairwin.archive/1"}) + "\n")
    rows, problems = read_archive(path)
    assert len(rows) == 1 and "row 1 is not a fairwin.archive/1 row" in problems[0]
