"""Each registered format names its model, the model names its format back, and the model's
``format`` field is a Literal of exactly the ids the format reads, defaulting to the id it writes."""

from __future__ import annotations

import importlib
import json
import typing
from pathlib import Path

import pytest

from fairwin.errors import CorruptRecordError
from fairwin.formats import REGISTRY, STATUS, RecordFormat
from fairwin.records import Record, append_records, read_record, read_records, write_record


def _model(fmt: RecordFormat) -> type[Record]:
    module, _, name = fmt.model.partition(":")
    found = getattr(importlib.import_module(module), name)
    assert isinstance(found, type) and issubclass(found, Record), f"{fmt.id}: {fmt.model} is not a Record"
    return found


def test_the_registry_holds_every_format_once() -> None:
    assert len(REGISTRY) == len({f.name for f in REGISTRY}) >= 31


@pytest.mark.parametrize("fmt", REGISTRY, ids=lambda f: f.id)
def test_each_format_names_its_model_and_the_model_names_it_back(fmt: RecordFormat) -> None:
    model = _model(fmt)
    assert model.record_format is fmt
    field = model.model_fields["format"]
    assert typing.get_origin(field.annotation) is typing.Literal, f"{fmt.model}.format is not a Literal"
    # Each id the format reads is taken as it is, or upgraded to this one as it is read.
    assert set(typing.get_args(field.annotation)) | set(model.upgrades) == set(fmt.readable)
    assert set(typing.get_args(field.annotation)).isdisjoint(model.upgrades)
    assert field.default == fmt.id


def _status(**fields: object) -> Record:
    model = _model(STATUS)
    return model.model_validate({"window_id": "w", "state": "running", "time": 1.0, **fields})


def test_a_record_round_trips_with_its_format(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    write_record(path, _status())
    assert json.loads(path.read_text())["format"] == STATUS.id
    assert read_record(path, type(_status())) == _status()


def test_a_record_of_another_format_or_shape_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    path.write_text(json.dumps({"format": "fairwin.status/9", "window_id": "w"}))
    with pytest.raises(CorruptRecordError, match=r"status\.json: format 'fairwin\.status/9'"):
        read_record(path, type(_status()))
    path.write_text(json.dumps({"format": STATUS.id, "window_id": "w", "state": "lost", "time": 1}))
    with pytest.raises(CorruptRecordError, match=r"status\.json: state"):
        read_record(path, type(_status()))


def test_appended_rows_read_back_and_a_bad_row_is_named_by_its_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    append_records(path, [_status(), _status(state="complete")])
    assert [r.model_dump()["state"] for r in read_records(path, type(_status()))] == ["running", "complete"]
    with path.open("a") as f:
        f.write(json.dumps({"format": STATUS.id, "window_id": "w"}) + "\n")
    with pytest.raises(CorruptRecordError, match=r"rows\.jsonl row 3: state"):
        read_records(path, type(_status()))


def test_a_telemetry_row_carries_every_field_of_a_gpu_sample() -> None:
    # TelemetryRow is GpuSample's fields as a record (each optional: a failed read has only time and error).
    from fairwin.telemetry.gpu import GpuSample
    from fairwin.telemetry.sampler import TelemetryRow

    assert set(GpuSample.model_fields) == set(TelemetryRow.model_fields) - {"format", "error"}
