"""An archived control start: one row per control start x cell, keyed the way the runbook keys it.

A row says what was measured (every repeat's pooled metrics) and everything a later
window must match before it may take this row's spread as its own noise: the control
role and mode, production's commit, the cell's shape, the hardware (hosts, GPU model
and count) and the clock cap each host's GPUs ran at. ``fairwin.archive/1`` rows, written
before the keys existed, are read with those keys null: they are kept and shown, and never
match a window's key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import ConfigDict, SerializerFunctionWrapHandler, model_serializer, model_validator

from fairwin.formats import ARCHIVE, ARCHIVE_DROP, RecordFormat
from fairwin.records import Record, SparseModel
from fairwin.rows import MetricValues


class ArchivedRepeat(MetricValues):
    repeat: int


class ArchiveRow(Record):
    """``fairwin.archive/2``: one archived control start x cell; a /1 row is read as /2 with its keys null."""

    record_format: ClassVar[RecordFormat] = ARCHIVE
    upgrades = ("fairwin.archive/1",)
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["fairwin.archive/2"] = "fairwin.archive/2"
    window_id: str
    time: float
    commit: str | None  # the commit under test (the plan repository's HEAD when the window ran)
    mode: str
    role: str
    start: str
    cell: str
    max_tokens: int
    clock_cap_mhz: float | None  # the start's one cap (null when its GPUs disagreed or none was observed)
    repeats: list[ArchivedRepeat]
    # The keys (fairwin.archive/2); null in rows upgraded from /1.
    production_commit: str | None = None
    prompt_tokens: int | None = None
    concurrency: int | None = None
    temperature: float | None = None
    hosts: list[str] | None = None  # where the control ran: host names, fairwin's own included when it ran there
    gpu_model: str | None = None
    gpu_count: int | None = None
    clock_caps_mhz: dict[str, float | None] | None = None  # per host; {} when no GPU was observed
    # The import that brought the row in (`fairwin archive import --map`), by which it is listed, dropped or
    # replaced; a window's own rows have none, and are stored without the field (the same bytes as before it).
    imported: str | None = None

    @model_serializer(mode="wrap")
    def _imported_only_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        if dumped.get("imported") is None:
            dumped.pop("imported", None)
        return dumped

    @model_validator(mode="before")
    @classmethod
    def _upgraded(cls, item: Any) -> Any:
        """A /1 row becomes /2 with its keys null (their defaults), every field kept."""
        if isinstance(item, dict) and item.get("format") in cls.upgrades:
            return {**item, "format": ARCHIVE.id}
        return item

    @property
    def identity(self) -> tuple[str, str, str]:
        """What makes a row unique: a retried append of the same (window, start, cell) adds nothing."""
        return (self.window_id, self.start, self.cell)

    def key(self) -> ArchiveKey:
        return ArchiveKey(
            cell=self.cell,
            role=self.role,
            mode=self.mode,
            production_commit=self.production_commit,
            prompt_tokens=self.prompt_tokens,
            max_tokens=self.max_tokens,
            concurrency=self.concurrency,
            temperature=self.temperature,
            clock_cap_mhz=self.clock_cap_mhz,
            hosts=tuple(self.hosts) if self.hosts is not None else None,
            gpu_model=self.gpu_model,
            gpu_count=self.gpu_count,
            clock_caps_mhz=tuple(sorted(self.clock_caps_mhz.items())) if self.clock_caps_mhz is not None else None,
        )

    def mean(self, metric: str) -> float | None:
        values = [v for r in self.repeats if (v := getattr(r, metric)) is not None]
        return float(np.mean(values)) if values else None


class ImportDropped(Record):
    """``fairwin.archive-drop/1``: a line of a JSONL archive saying that an import's rows are no longer used (the
    file is only ever appended to; a PostgreSQL archive deletes them instead)."""

    record_format: ClassVar[RecordFormat] = ARCHIVE_DROP
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["fairwin.archive-drop/1"] = "fairwin.archive-drop/1"
    import_id: str
    time: float
    rows: int  # how many rows of the import it took out
    replaced_by: str | None = None  # the import that replaced it, where one did


@dataclass(frozen=True)
class ArchiveKey:
    """Everything two control starts must share to be compared: their spread is one noise."""

    cell: str
    role: str
    mode: str
    production_commit: str | None
    prompt_tokens: int | None
    max_tokens: int
    concurrency: int | None
    temperature: float | None
    clock_cap_mhz: float | None  # the one cap the start's hosts agreed on
    hosts: tuple[str, ...] | None
    gpu_model: str | None
    gpu_count: int | None
    clock_caps_mhz: tuple[tuple[str, float | None], ...] | None

    def describe(self) -> dict[str, Any]:
        """The key as JSON-ready fields (clock caps as a mapping of host to cap)."""
        fields = dict(self.__dict__)
        fields["hosts"] = list(self.hosts) if self.hosts is not None else None
        fields["clock_caps_mhz"] = dict(self.clock_caps_mhz) if self.clock_caps_mhz is not None else None
        return fields


class PlannedKey(SparseModel):
    """A cell's archive key as the window plans it, before any start ran: the one match that the gates, the
    looks and the decision all count archive rows with. Only the fields set are matched; ``None`` matches only
    an unknown (a row keyed null)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cell: str
    role: str | None = None
    mode: str | None = None
    production_commit: str | None = None
    prompt_tokens: int | None = None
    max_tokens: int | None = None
    concurrency: int | None = None
    temperature: float | None = None
    hosts: tuple[str, ...] | None = None
    clock_cap_mhz: float | None = None  # production's cap: every start must run at it

    def match(self) -> dict[str, object]:
        """The fields the archive's rows must equal (a row's own name for each)."""
        return {name: getattr(self, name) for name in sorted(self.model_fields_set)}

    def mismatch(self, row: ArchiveRow) -> str | None:
        """Every field on which ``row`` differs from this key, each said as ``field row's value, not ours``;
        None when it matches."""
        differs = []
        for name, wanted in self.match().items():
            found = tuple(row.hosts) if name == "hosts" and row.hosts is not None else getattr(row, name)
            if found != wanted:
                differs.append(f"{name} {_shown(found)}, not {_shown(wanted)}")
        return "; ".join(differs) or None

    def matches(self, row: ArchiveRow) -> bool:
        return self.mismatch(row) is None


def _shown(value: object) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)
