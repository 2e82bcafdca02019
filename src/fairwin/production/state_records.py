"""What fairwin stores about production: its declaration (a snapshot), the process it launched, its reading.

``production.json`` and ``live.json`` live in production's state directory between windows; a
snapshot is what ``fairwin production snapshot`` writes and a chain's next window is checked against.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import ConfigDict

from fairwin.directory.declaration import ProductionDeclaration
from fairwin.formats import PRODUCTION_SNAPSHOT, PRODUCTION_STATE, RecordFormat
from fairwin.records import Record


class SnapshotRecord(Record):
    """``fairwin.production-snapshot/1``: production's declaration (argv, env, env files' digests; or its up
    and down commands) and the sha256 that names it."""

    record_format: ClassVar[RecordFormat] = PRODUCTION_SNAPSHOT
    model_config = ConfigDict(extra="allow")  # the declaration's own fields, whichever kind it is

    format: Literal["fairwin.production-snapshot/1"] = "fairwin.production-snapshot/1"
    sha256: str
    base_url: str | None = None


class ProductionState(Record):
    """``state_dir/production.json``: production as fairwin last launched it."""

    record_format: ClassVar[RecordFormat] = PRODUCTION_STATE
    model_config = ConfigDict(extra="forbid")

    format: Literal["fairwin.production-state/1"] = "fairwin.production-state/1"
    pid: int
    argv: list[str]  # the plan's words: {env:NAME} unresolved, *** after a secret flag
    host: str | None
    started_unix: float
    snapshot: ProductionDeclaration
    # When its process started (clock ticks after boot): the pid is production while this holds, whatever its
    # command line became (a wrapper that execs its server). None: written before it was recorded.
    started_ticks: int | None = None
    container: str | None = None  # a container production: its name (its pid is its main process's)
