"""Production's declaration as a window records it: what the plan says production is, named by its sha256.

A production the plan launches (``[production] role``) is declared by its argv, environment, env files'
digests and base URL (and its host and container, only where it has them: a production here keeps the
sha256 it always had); one managed elsewhere by its up and down commands and base URL. The sha256 is taken
over exactly the fields the declaration has, so the same declaration always has the same name. A window
adds ``live``, production as it really ran, read before the take-down (``fairwin.production-live/1``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, JsonValue, SerializerFunctionWrapHandler, model_serializer

from fairwin.directory.start_receipt import SpeculativeSource
from fairwin.files import canonical_json, sha256_bytes
from fairwin.formats import PRODUCTION_LIVE, RecordFormat
from fairwin.records import Record, SparseModel


class LiveMember(BaseModel):
    """One running process of production, as read before a take-down: where it was found and what it runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    member: str  # "head", or "worker N"
    host: str | None = None
    found_by: str  # "pid 41 (fairwin launched it)", "match 'vllm serve': pid 41", "container vllm (docker)"
    argv: list[str]
    env: dict[str, str]  # fingerprinted
    speculative: dict[str, JsonValue] = {}  # the engine's own speculative config, as it reported or was given it
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


class ProductionDeclaration(SparseModel):
    """One declaration of either kind; only the fields it has are set, and only those are stored (wherever it is
    held: window.json, the marker, production.json) and digested."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str | None = None
    argv: list[str] | None = None
    env: dict[str, str] | None = None
    env_files: dict[str, str] | None = None  # each env file's path -> its sha256
    up: list[str] | None = None
    down: list[str] | None = None
    base_url: str | None = None
    slurm_job: str | None = None  # production as a Slurm job, by name
    host: str | None = None
    container: dict[str, JsonValue] | None = None  # the role's [container] table as the plan states it
    sha256: str
    live: LiveRecord | None = None  # production as it ran, read before the window took it down

    @classmethod
    def of(cls, **declared: Any) -> ProductionDeclaration:
        """A declaration named by the sha256 of exactly the fields given."""
        return cls(**declared, sha256=sha256_bytes(canonical_json(declared).encode()))

    def declared(self) -> dict[str, Any]:
        """The fields the declaration has, as digested (``sha256`` and ``live`` are not part of it)."""
        return self.model_dump(mode="json", exclude={"sha256", "live"})
