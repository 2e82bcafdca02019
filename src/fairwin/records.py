"""A stored record's one model, and the one set of helpers every record is written and read through.

Each format in :mod:`fairwin.formats` names its model (``RecordFormat.model``). The model names
its format back (``record_format``), and its ``format`` field is a ``Literal`` of the ids that
format reads, defaulting to the id it writes; tests/unit/test_records.py holds the three equal,
so a format id is never spelt a second time without a test noticing.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, SerializerFunctionWrapHandler, ValidationError, model_serializer

from fairwin.errors import CorruptRecordError
from fairwin.files import append_jsonl, first_problem, read_json, read_jsonl, write_json_atomic, write_jsonl_atomic
from fairwin.formats import RecordFormat


class SparseModel(BaseModel):
    """A part of a record that is stored with only the fields given or assigned to it, wherever it is held
    (a probe that no server answered has no reply fields; a production here names no host). A sparse
    :class:`Record` does the same for itself, at its own dump."""

    @model_serializer(mode="wrap")
    def _only_set_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {key: value for key, value in dumped.items() if key in self.model_fields_set}


class CompactModel(BaseModel):
    """A part of a record stored without the fields it has no value for (a restore that was not given back has
    no watch; a placeholder here names no host), wherever it is held."""

    @model_serializer(mode="wrap")
    def _without_nones(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {key: value for key, value in dumped.items() if value is not None}


class Record(BaseModel):
    """A stored or printed record: a model whose ``format`` is its format's id."""

    #: The format this model writes and reads (set by each model; the registry names the model back).
    record_format: ClassVar[RecordFormat]
    #: Written with only the fields given or assigned, for records that grow as a step runs (start.json)
    #: or whose readers tell an absent field from a null one.
    sparse: ClassVar[bool] = False
    #: Older ids of the format that the model turns into its own as it reads them (a before-validator).
    upgrades: ClassVar[tuple[str, ...]] = ()

    format: str

    def stored(self) -> dict[str, Any]:
        """The record as JSON, ``format`` first."""
        return {"format": self.format, **self.model_dump(mode="json", exclude_unset=self.sparse)}


R = TypeVar("R", bound=Record)


def write_record(path: Path, record: Record) -> None:
    """One record as a JSON file, written atomically."""
    write_json_atomic(path, record.stored())


def write_records(path: Path, records: Iterable[Record]) -> None:
    """A JSONL file of records, written atomically as a whole."""
    write_jsonl_atomic(path, [r.stored() for r in records])


def append_records(path: Path, records: Iterable[Record]) -> None:
    """Rows appended to a JSONL file, locked and fsynced (files.append_jsonl)."""
    append_jsonl(path, [r.stored() for r in records])


def read_record(path: Path, model: type[R]) -> R:
    """A JSON record fairwin wrote, of a format ``model`` reads; any damage is a CorruptRecordError."""
    return validated(model, read_json(path, model.record_format.readable), str(path))


def read_records(path: Path, model: type[R]) -> list[R]:
    """Every row of a JSONL file fairwin wrote, each of a format ``model`` reads."""
    rows = read_jsonl(path, model.record_format.readable)
    return [validated(model, row, f"{path} row {number}") for number, row in enumerate(rows, 1)]


def validated(model: type[R], value: dict[str, Any], where: str) -> R:
    """``value`` read into ``model``; a shape it does not have is a CorruptRecordError naming ``where``."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise CorruptRecordError(f"{where}: {first_problem(exc)}") from None
