"""Mapping another tool's archive rows: one field at a time, named when it does not map."""

from __future__ import annotations

import datetime

import pytest

from fairwin.archive.foreign import ArchiveMap, Unmapped, map_row

SPEC = ArchiveMap.model_validate(
    {
        "fields": {"window_id": "w", "time": "t", "start": "s", "cell": "c", "max_tokens": "n"},
        "values": {"mode": "controlled", "role": "A", "hosts": ["h1", "h2"], "clock_cap_mhz": 1980},
        "repeats": {"metrics": {"pooled_rate_tps": "rate"}},  # no list: each row is one repeat
    }
)
ROW = {"w": "x", "t": "2026-11-01T03:00:00+01:00", "s": 3, "c": "short", "n": 48, "rate": 500.5}


def test_a_row_without_a_list_of_repeats_is_one_repeat_and_keys_each_host_at_its_one_cap() -> None:
    row = map_row(ROW, SPEC)
    assert row is not None and row.start == "s3"
    assert row.time == datetime.datetime(2026, 11, 1, 2, tzinfo=datetime.UTC).timestamp()  # its zone kept
    assert [(r.repeat, r.pooled_rate_tps) for r in row.repeats] == [(1, 500.5)]
    assert row.clock_caps_mhz == {"h1": 1980, "h2": 1980} and row.commit is None and row.gpu_model is None


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"t": True}, "time: True is neither Unix seconds nor an ISO 8601 time"),
        ({"t": "yesterday"}, "time: 'yesterday' is neither Unix seconds nor an ISO 8601 time"),
        ({"rate": -1}, "repeat 1: pooled_rate_tps <- 'rate': Input should be greater than or equal to 0 (got -1)"),
        ({"n": "many"}, "max_tokens: Input should be a valid integer, unable to parse string as an integer"),
    ],
)
def test_a_value_the_archive_cannot_hold_is_named(change: dict[str, object], says: str) -> None:
    with pytest.raises(Unmapped, match=says.replace("(", r"\(").replace(")", r"\)")):
        map_row({**ROW, **change}, SPEC)


def test_a_map_naming_what_is_not_an_archive_field_or_metric_is_refused() -> None:
    with pytest.raises(ValueError, match=r"\['colour'\] are not archive fields"):
        ArchiveMap.model_validate({**SPEC.model_dump(), "values": {**SPEC.values, "colour": "red"}})
    with pytest.raises(ValueError, match=r"metrics \['speed'\] are not archive metrics"):
        ArchiveMap.model_validate({**SPEC.model_dump(), "repeats": {"metrics": {"speed": "s"}}})
    with pytest.raises(
        ValueError, match=r"\['role'\] are in more than one of \[fields\], \[values\] and \[cells.NAME\]"
    ):
        ArchiveMap.model_validate({**SPEC.model_dump(), "fields": {**SPEC.fields, "role": "r"}})
