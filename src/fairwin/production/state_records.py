"""What fairwin stores about production: its declaration (a snapshot), the process it launched, its reading.

``production.json`` and ``live.json`` live in production's state directory between windows; a
snapshot is what ``fairwin production snapshot`` writes and a chain's next window is checked against.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from fairwin.directory.declaration import ProductionDeclaration
from fairwin.directory.start_receipt import SpeculativeSource
from fairwin.formats import PRODUCTION_LIVE, PRODUCTION_SNAPSHOT, PRODUCTION_STATE, RecordFormat
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


class LiveMember(BaseModel):
    """One running process of production, as read before a take-down: where it was found and what it runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    member: str  # "head", or "worker N"
    host: str | None = None
    found_by: str  # "pid 41 (fairwin launched it)", "match 'vllm serve': pid 41", "container vllm (docker)"
    argv: list[str]
    env: dict[str, str]  # fingerprinted
    speculative: dict[str, Any] = {}  # the engine's own speculative config, as it reported or was given it
    mounts: list[dict[str, str]] | None = None  # a container's, as its runtime reports them
    speculative_source: SpeculativeSource = "argv"  # where its config was read; "unobserved": nowhere
    image_id: str | None = None  # a container's image

    @property
    def label(self) -> str:
        return f"production's {self.member}" + (f" on host {self.host}" if self.host else "")

    @model_serializer(mode="wrap")
    def _as_read(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A container's mounts and image only where it is one: the members' digest is over exactly this.
        dumped: dict[str, Any] = handler(self)
        return {k: v for k, v in dumped.items() if k not in ("mounts", "image_id") or v is not None}


class LiveRecord(Record):
    """``fairwin.production-live/1``: every process of production as read before a take-down."""

    record_format: ClassVar[RecordFormat] = PRODUCTION_LIVE
    sparse: ClassVar[bool] = True  # ``from_snapshot`` only where a stored reading stood in
    model_config = ConfigDict(extra="forbid")

    format: Literal["fairwin.production-live/1"] = "fairwin.production-live/1"
    read_unix: float
    members: list[LiveMember]
    sha256: str
    changed_since_last: list[str]
    from_snapshot: str | None = None
