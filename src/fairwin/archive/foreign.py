"""Another tool's control archive brought in: ``fairwin archive import FILE --map MAP.toml``.

A team moving over has months of control starts in its own JSONL (the runbook's
``control-archive.jsonl``: a cell, the start's role, pooled rates, the clock cap, the commit,
``max_tokens``). The map says, once, which of its fields is which archive field, which rows
are control starts, and the values its file never carries (the mode, the hosts, the GPUs).
Every row is mapped before anything is written: a row that does not map is named with its
line and the field, and then nothing is imported, so no archive is ever half an import.
"""

from __future__ import annotations

import datetime
import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import Field, JsonValue, ValidationError, model_validator

from fairwin.archive.archive_row import ArchivedRepeat, ArchiveRow
from fairwin.archive.noise import KEY_FIELDS
from fairwin.errors import InputError
from fairwin.files import json_field
from fairwin.plan.base import StrictModel
from fairwin.rows import METRICS

#: Archive fields a row must have, from the map's [fields] or [values].
REQUIRED = ("window_id", "time", "mode", "role", "start", "cell", "max_tokens")
#: Archive fields a row may have; left unmapped they are null (and so is the key they make): the commit under
#: test, the start's one cap, and every key of ArchiveKey not already required.
OPTIONAL = ("commit", "clock_cap_mhz", *(name for name in KEY_FIELDS if name not in REQUIRED))
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
    repeats: RepeatsMap

    @model_validator(mode="after")
    def _complete(self) -> ArchiveMap:
        both = sorted(set(self.fields) & set(self.values))
        unknown = sorted((set(self.fields) | set(self.values)) - set(REQUIRED) - set(OPTIONAL))
        missing = [name for name in REQUIRED if name not in self.fields and name not in self.values]
        if both:
            raise ValueError(f"{both} are in both [fields] and [values]; give each once")
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
    if spec.control is not None and _get(row, spec.control.field, "control") not in spec.control.equals:
        return None
    fields: dict[str, Any] = dict(spec.values)
    fields |= {name: _get(row, path, name) for name, path in spec.fields.items()}
    fields["time"] = _time(fields["time"])
    if isinstance(fields["start"], int):
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


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with path.open(encoding="utf-8") as handle:
            yield from ((number, line) for number, line in enumerate(handle, 1) if line.strip())
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None


def mapped_rows(path: Path, spec: ArchiveMap) -> tuple[list[ArchiveRow], int]:
    """Every control start of a foreign archive file as archive rows, and how many rows were not control starts;
    InputError naming each row that does not map (line and field) when any does not: nothing is half-imported."""
    rows: list[ArchiveRow] = []
    skipped = 0
    problems: list[str] = []
    for number, line in _lines(path):
        try:
            mapped = map_row(json.loads(line), spec)
        except json.JSONDecodeError as exc:
            problems.append(f"{path}:{number}: not JSON ({exc.msg})")
        except Unmapped as exc:
            problems.append(f"{path}:{number}: {exc}")
        else:
            if mapped is None:
                skipped += 1
            else:
                rows.append(mapped)
    if problems:
        more = f" (+{len(problems) - SHOWN} more)" if len(problems) > SHOWN else ""
        raise InputError(f"{len(problems)} row(s) do not map, nothing imported: " + "; ".join(problems[:SHOWN]) + more)
    if not rows:
        raise InputError(f"{path}: no row is a control start under the map; check [control]")
    return rows, skipped
