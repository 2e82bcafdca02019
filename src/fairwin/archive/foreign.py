"""Another tool's control archive brought in: ``fairwin archive import FILE --map MAP.toml``.

A team moving over has months of control starts in its own JSONL (the runbook's
``control-archive.jsonl``: a cell, the start's role, pooled rates, the clock cap, the commit,
``max_tokens``). The map says, once, which of its fields is which archive field, which rows
are control starts, and the values its file never carries (the mode, the hosts, the GPUs).
Every row is mapped before anything is written: a row that does not map is named with its
line and the field, and then nothing is imported, so no archive is ever half an import.
"""

from __future__ import annotations

import csv
import datetime
import json
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, JsonValue, ValidationError, model_validator

from fairwin.archive.archive_row import ArchivedRepeat, ArchiveRow
from fairwin.archive.noise import KEY_FIELDS
from fairwin.errors import InputError, more
from fairwin.files import json_field
from fairwin.plan.base import StrictModel
from fairwin.rows import METRICS

#: Archive fields a row must have, from the map's [fields] or [values].
REQUIRED = ("window_id", "time", "mode", "role", "start", "cell", "max_tokens")
#: Archive fields a row may have; left unmapped they are null (and so is the key they make): the commit under
#: test, the start's one cap, and every key of ArchiveKey not already required.
OPTIONAL = ("commit", *(name for name in KEY_FIELDS if name not in REQUIRED))
#: The most problems a refused import lists.
SHOWN = 10


class ControlRows(StrictModel):
    field: str = Field(description="The foreign field that says which start a row is, e.g. the start's role.")
    equals: list[Any] = Field(min_length=1, description="Its values on a control start (e.g. ['OFF']).")


class RepeatsMap(StrictModel):
    field: str | None = Field(None, description="The field holding each repeat (a list); none: a row is one repeat.")
    number: str | None = Field(None, description="Each repeat's number in it (default: its position, from 1).")
    metrics: dict[str, str] = Field(min_length=1, description="Archive metric -> the repeat's field.")

    @model_validator(mode="after")
    def _known(self) -> RepeatsMap:
        unknown = sorted(set(self.metrics) - set(METRICS))
        if unknown:
            raise ValueError(f"metrics {unknown} are not archive metrics ({', '.join(METRICS)})")
        return self


class ArchiveMap(StrictModel):
    """MAP.toml: [control], [fields], [values], [repeats]."""

    control: ControlRows | None = Field(None, description="Which rows are control starts (default: every row).")
    fields: dict[str, str] = Field(default_factory=dict, description="Archive field -> the foreign row's field.")
    values: dict[str, JsonValue] = Field(default_factory=dict, description="Archive field -> one value for every row.")
    cells: dict[str, dict[str, JsonValue]] = Field(
        default_factory=dict, description="A cell's name -> archive field -> its value for that cell's rows only."
    )
    repeats: RepeatsMap

    @model_validator(mode="after")
    def _complete(self) -> ArchiveMap:
        per_cell = {name for given in self.cells.values() for name in given}
        both = sorted((set(self.fields) & set(self.values)) | (per_cell & (set(self.fields) | set(self.values))))
        unknown = sorted((set(self.fields) | set(self.values) | per_cell) - set(REQUIRED) - set(OPTIONAL))
        missing = [
            name
            for name in REQUIRED
            if name not in self.fields
            and name not in self.values
            and not (self.cells and all(name in given for given in self.cells.values()))
        ]
        if both:
            raise ValueError(f"{both} are in more than one of [fields], [values] and [cells.NAME]; give each once")
        if "cell" in per_cell:
            raise ValueError("[cells.NAME] cannot set cell: the table's name is the cell")
        if unknown:
            raise ValueError(f"{unknown} are not archive fields ({', '.join(REQUIRED + OPTIONAL)})")
        if missing:
            raise ValueError(f"no [fields] or [values] entry for {missing}: every archived start needs them")
        return self


def load_map(path: Path) -> ArchiveMap:
    try:
        return ArchiveMap.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the map: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a TOML map: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise InputError(f"{path}: {where}: {first['msg'].removeprefix('Value error, ')}") from None


class Unmapped(Exception):
    """A foreign row's field that is not there, or not what the archive field needs."""


def _get(row: Any, path: str, target: str) -> Any:
    try:
        return json_field(row, path)
    except KeyError:
        raise Unmapped(f"{target} <- '{path}': the row has no such field") from None


def _time(value: Any) -> float:
    """Unix seconds, or an ISO 8601 time (a naive one is UTC)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)  # Unix seconds written as text (a CSV's every value is)
        except ValueError:
            pass
        try:
            moment = datetime.datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            return (moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)).timestamp()
    raise Unmapped(f"time: {value!r} is neither Unix seconds nor an ISO 8601 time")


def _repeats(row: Any, spec: RepeatsMap) -> list[ArchivedRepeat]:
    items = _get(row, spec.field, "repeats") if spec.field else [row]
    if not isinstance(items, list) or not items:
        raise Unmapped(f"repeats <- '{spec.field}': not a list of repeats")
    repeats = []
    for position, item in enumerate(items, 1):
        number = _get(item, spec.number, "repeat") if spec.number else position
        metrics = {name: _get(item, field, name) for name, field in spec.metrics.items()}
        try:
            repeats.append(ArchivedRepeat(repeat=number, **metrics))
        except ValidationError as exc:
            first = exc.errors()[0]
            name = str(first["loc"][0]) if first["loc"] else "repeat"
            source = spec.metrics.get(name, spec.number or "its position")
            raise Unmapped(
                f"repeat {position}: {name} <- '{source}': {first['msg']} (got {first.get('input')!r})"
            ) from None
    return repeats


def map_row(row: Any, spec: ArchiveMap) -> ArchiveRow | None:
    """The archive row a foreign row maps to; None when it is not a control start. Unmapped names the field."""
    if not isinstance(row, dict):
        raise Unmapped("not a JSON object")
    if spec.control is not None and not _one_of(_get(row, spec.control.field, "control"), spec.control.equals):
        return None
    fields: dict[str, Any] = dict(spec.values)
    fields |= {name: _get(row, path, name) for name, path in spec.fields.items()}
    fields |= spec.cells.get(str(fields.get("cell")), {})
    missing = [name for name in REQUIRED if fields.get(name) is None]
    if missing and missing[0] in spec.fields:
        raise Unmapped(f"{missing[0]} <- '{spec.fields[missing[0]]}': null, and every archived start needs it")
    if missing:
        raise Unmapped(
            f"{missing[0]}: no value for cell {fields.get('cell')!r} (map it, or give it in [values] or "
            f"[cells.{fields.get('cell')}])"
        )
    fields["time"] = _time(fields["time"])
    if isinstance(fields["start"], int) or (isinstance(fields["start"], str) and fields["start"].isdigit()):
        fields["start"] = f"s{fields['start']}"  # a start numbered 1, 2, 3 as fairwin names its own
    if "clock_caps_mhz" not in fields and fields.get("hosts") is not None and "clock_cap_mhz" in fields:
        fields["clock_caps_mhz"] = {host: fields["clock_cap_mhz"] for host in fields["hosts"]}  # one cap, every host
    try:
        return ArchiveRow(
            **{name: fields.get(name) for name in (*REQUIRED, *OPTIONAL)}, repeats=_repeats(row, spec.repeats)
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise Unmapped(f"{where}: {first['msg']} (got {first.get('input')!r})") from None


def _one_of(value: Any, allowed: list[Any]) -> bool:
    """Whether a row's value is one the map lists; a CSV's text "1" is the map's 1."""
    return value in allowed or (isinstance(value, str) and value in {str(item) for item in allowed})


def _records(path: Path) -> Iterator[tuple[int, Any]]:
    """Each row of the file with its line: a JSON object a line, or, for a ``.csv`` file, a row under its header
    (an empty value is null). A line that is not JSON is yielded as its JSONDecodeError."""
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            if path.suffix.lower() == ".csv":
                reader = csv.DictReader(handle)
                for row in reader:
                    yield reader.line_num, {key: value if value != "" else None for key, value in row.items()}
                return
            for number, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        yield number, json.loads(line)
                    except json.JSONDecodeError as exc:
                        yield number, exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: not a UTF-8 JSONL or CSV file ({exc})") from None


@dataclass(frozen=True)
class Mapped:
    """A foreign archive as archive rows: its control starts, how many rows were not, and what the map may have
    keyed wrongly without being told (said, not refused)."""

    rows: list[ArchiveRow]
    skipped: int
    warnings: list[str]


def mapped_rows(path: Path, spec: ArchiveMap) -> Mapped:
    """Every control start of a foreign archive file (JSONL or CSV) as archive rows; rows that are each one repeat
    (no ``[repeats] field``) grouped into the starts they belong to. InputError naming each row that does not
    map (line and field) when any does not: nothing is half-imported."""
    found: list[tuple[int, ArchiveRow]] = []
    skipped = 0
    problems: list[str] = []
    for number, record in _records(path):
        try:
            if isinstance(record, json.JSONDecodeError):
                raise Unmapped(f"not JSON ({record.msg})")
            mapped = map_row(record, spec)
        except Unmapped as exc:
            problems.append(f"{path}:{number}: {exc}")
            continue
        if mapped is None:
            skipped += 1
        else:
            found.append((number, mapped))
    rows = found if spec.repeats.field is not None else _grouped(path, found, spec.repeats, problems)
    if problems:
        hidden = problems[SHOWN:]
        raise InputError(
            f"{len(problems)} row(s) do not map, nothing imported: " + "; ".join(problems[:SHOWN]) + more(hidden),
            details=hidden,
        )
    if not rows:
        raise InputError(f"{path}: no row is a control start under the map; check [control]")
    mapped_starts = [row for _, row in rows]
    return Mapped(mapped_starts, skipped, _shared_shape_warnings(spec, mapped_starts))


def _grouped(
    path: Path, found: list[tuple[int, ArchiveRow]], spec: RepeatsMap, problems: list[str]
) -> list[tuple[int, ArchiveRow]]:
    """Rows that are one repeat each, as the starts they belong to (same window, start and cell): their repeats
    together (numbered by the map's field, else in the file's order), the start's time its last repeat's; rows of
    one start that disagree on anything else are named."""
    starts: dict[tuple[str, str, str], list[tuple[int, ArchiveRow]]] = {}
    for number, row in found:
        starts.setdefault(row.identity, []).append((number, row))
    result = []
    for members in starts.values():
        first_line, first = members[0]
        for number, row in members[1:]:
            differs = next(
                (
                    name
                    for name in type(row).model_fields
                    if name not in ("time", "repeats") and getattr(row, name) != getattr(first, name)
                ),
                None,
            )
            if differs is not None:
                problems.append(
                    f"{path}:{number}: {differs} {getattr(row, differs)!r} differs from line {first_line}'s "
                    f"{getattr(first, differs)!r} in the same start ({first.window_id} {first.start} {first.cell})"
                )
        repeats = [rep for _, row in members for rep in row.repeats]
        if spec.number is None:
            repeats = [rep.model_copy(update={"repeat": position}) for position, rep in enumerate(repeats, 1)]
        numbers = [rep.repeat for rep in repeats]
        if len(set(numbers)) != len(numbers):
            problems.append(
                f"{path}:{first_line}: start {first.window_id} {first.start} {first.cell} has repeat "
                f"numbers {numbers}; each repeat once"
            )
        update = {"repeats": sorted(repeats, key=lambda rep: rep.repeat), "time": max(r.time for _, r in members)}
        result.append((first_line, first.model_copy(update=update)))
    return result


#: A cell's shape, which one value in [values] gives every cell alike.
SHAPE = ("prompt_tokens", "max_tokens", "concurrency", "temperature")


def _shared_shape_warnings(spec: ArchiveMap, rows: list[ArchiveRow]) -> list[str]:
    cells = sorted({row.cell for row in rows})
    if len(cells) < 2:
        return []
    return [
        f"[values] {name} = {spec.values[name]} keys every cell alike ({', '.join(cells)}); where their shapes "
        f"differ, give it per cell in [cells.NAME] or map it from a field, then replace this import"
        for name in SHAPE
        if name in spec.values
    ]
