"""The archive's rows, keys, selection and noise, by hand; the JSONL file's torn lines and repeats."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fairwin.archive import (
    ArchivedRepeat,
    ArchiveRow,
    Snapshot,
    chosen_location,
    groups,
    noise,
    open_archive,
    read_archive,
    redact,
    select,
)


def row(window: str, start: str, values: list[float], **keys: Any) -> ArchiveRow:
    fields: dict[str, Any] = {
        "window_id": window,
        "time": 0.0,
        "commit": "abc",
        "mode": "controlled",
        "role": "A",
        "start": start,
        "cell": "c",
        "max_tokens": 512,
        "clock_cap_mhz": None,
        "production_commit": "p1",
        "prompt_tokens": 64,
        "concurrency": 1,
        "temperature": 0.0,
        "hosts": ["gpu1"],
        "gpu_model": "H200",
        "gpu_count": 1,
        "clock_caps_mhz": {"gpu1": 1980.0},
    }
    repeats = [ArchivedRepeat(repeat=i, pooled_rate_tps=v) for i, v in enumerate(values, 1)]
    return ArchiveRow(**{**fields, **keys, "repeats": repeats})


def test_noise_by_hand() -> None:
    rows = [row("w1", "s1", [99, 101]), row("w1", "s3", [101, 103]), row("w2", "s1", [104, 106])]
    result = noise(rows, "c", "pooled_rate_tps")
    means = np.array([100.0, 102.0, 105.0])
    assert result.starts == 3 and result.windows == 2
    assert result.launch_cv_pct == pytest.approx(100 * means.std(ddof=1) / means.mean())
    assert result.range_pct == pytest.approx(100 * 5 / means.mean())
    # Every start's repeats deviate by +-1 around its mean: pooled variance 6 / 3 = 2... per degree of freedom 1.
    assert result.repeat_cv_pct == pytest.approx(100 * math.sqrt(6 / 3) / means.mean())


@pytest.mark.parametrize(
    "differs",
    [
        {"cell": "d"},
        {"role": "P"},
        {"mode": "production-policy"},
        {"production_commit": "p2"},
        {"prompt_tokens": 128},
        {"max_tokens": 128},
        {"concurrency": 4},
        {"temperature": 1.0},
        {"hosts": ["gpu2"]},
        {"gpu_model": "H100"},
        {"gpu_count": 2},
        {"clock_caps_mhz": {"gpu1": 2100.0}},
        {"clock_caps_mhz": {}},
    ],
)
def test_a_row_that_differs_in_any_key_is_not_the_same_noise(differs: dict[str, Any]) -> None:
    mine = row("w1", "s1", [1, 1])
    other = row("w2", "s1", [1, 1], **differs)
    assert select([mine, other], mine.key().__dict__) == [mine]
    assert len(groups([mine, other])) == 2
    # The commit under test is not a key: a control is production's build whatever the candidate was.
    assert select([mine, row("w3", "s1", [1, 1], commit="zzz")], mine.key().__dict__) != [mine]


def test_select_by_some_keys_and_refuses_a_name_that_is_not_one() -> None:
    rows = [row("w", "s1", [1, 1]), row("w", "s3", [1, 1], role="P"), row("w2", "s1", [1, 1], cell="d")]
    assert len(select(rows, {"cell": "c"})) == 2
    assert len(select(rows, {"cell": "c", "role": "A"})) == 1
    with pytest.raises(ValueError, match="not archive keys"):
        select(rows, {"commit": "abc"})


def test_a_first_version_row_is_read_with_its_keys_unknown_and_matches_no_window() -> None:
    old = {
        "format": "fairwin.archive/1",
        "window_id": "w",
        "time": 0.0,
        "commit": None,
        "mode": "m",
        "role": "A",
        "start": "s1",
        "cell": "c",
        "max_tokens": 8,
        "clock_cap_mhz": 1980.0,
        "repeats": [],
    }
    upgraded = ArchiveRow.model_validate(old)  # a /1 row is upgraded as it is read
    assert upgraded.format == "fairwin.archive/2" and upgraded.clock_cap_mhz == 1980.0
    assert upgraded.production_commit is None and upgraded.hosts is None and upgraded.clock_caps_mhz is None
    assert select([upgraded], row("x", "s1", []).key().__dict__) == []


def test_the_snapshot_digest_is_the_rows_not_their_order_or_place() -> None:
    a, b = row("w1", "s1", [1.0, 2.0]), row("w2", "s1", [3.0, 4.0], time=5.0)
    from fairwin.archive.store import canonical

    one = Snapshot("here", canonical([a, b]))
    other = Snapshot("postgresql://there", canonical([b, a]))
    assert one.digest == other.digest and one.record().model_dump() == {"rows": 2, "sha256": one.digest}
    assert Snapshot("here", canonical([a])).digest != one.digest


def test_passwords_never_leave_a_location() -> None:
    assert redact("postgresql://ops:s3cret@db:5432/fw") == "postgresql://ops:***@db:5432/fw"
    assert redact("postgresql://db/fw") == "postgresql://db/fw"
    assert redact("/srv/archive.jsonl") == "/srv/archive.jsonl"


def test_the_environment_names_the_archive_before_the_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAIRWIN_ARCHIVE_URL", raising=False)
    assert chosen_location(None, tmp_path, tmp_path / "w") == str(tmp_path / "w" / "control-archive.jsonl")
    assert chosen_location("a/x.jsonl", tmp_path, tmp_path / "w") == str(tmp_path / "a" / "x.jsonl")
    monkeypatch.setenv("FAIRWIN_ARCHIVE_URL", "postgresql://db/fw")
    assert chosen_location("a/x.jsonl", tmp_path, tmp_path / "w") == "postgresql://db/fw"


def test_torn_line_is_reported_kept_and_never_glued_to_the_next_row(tmp_path: Path) -> None:
    path = tmp_path / "archive.jsonl"
    store = open_archive(path)
    store.append([row("w1", "s1", [1, 2])])
    with path.open("a") as handle:
        handle.write('{"format": "fairwin.archive/2", "window_id": "w2", "ti')  # a writer died here
    store.append([row("w3", "s1", [3, 4])])
    snapshot = read_archive(path)
    assert [r.window_id for r in snapshot.rows] == ["w1", "w3"]
    assert len(snapshot.problems) == 1 and "archive.jsonl:2: torn or corrupt line" in snapshot.problems[0]
    lines = path.read_text().splitlines()
    assert lines[1].endswith('"ti') and len(lines) == 3  # the torn fragment stays, untouched


def test_a_row_written_twice_by_hand_is_used_once_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "archive.jsonl"
    line = json.dumps(row("w1", "s1", [1, 2]).model_dump(mode="json"))
    path.write_text(line + "\n" + line + "\n")
    snapshot = read_archive(path)
    assert snapshot.count == 1 and "row 2 repeats window w1 s1 c; used once" in snapshot.problems[0]


def test_foreign_rows_and_unknown_versions_are_reported_not_used(tmp_path: Path) -> None:
    path = tmp_path / "archive.jsonl"
    good = row("w", "s1", []).model_dump(mode="json")
    path.write_text(json.dumps({"hello": 1}) + "\n" + json.dumps({**good, "format": "fairwin.archive/9"}) + "\n")
    snapshot = read_archive(path)
    assert snapshot.rows == ()
    assert [p.split(": ", 1)[1].split(" (")[0] for p in snapshot.problems] == [
        "row 1 is not a fairwin.archive/2 row",
        "row 2 is not a fairwin.archive/2 row",
    ]
