"""``window.json``, the window's manifest: what is about to run, written at open before anything is measured.

The window builds it (window/machine.py); the decision, the archive, the report, calibration
and the promotion gate read it. Its parts are typed here (the gates' summary, who runs it,
the environment), except production's snapshot and the archive's key, kept as those layers wrote them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from fairwin.directory.declaration import ProductionDeclaration
from fairwin.directory.environment import Environment
from fairwin.directory.gate_summary import GateSummary
from fairwin.directory.status import ChainRecord, Coordinator
from fairwin.formats import WINDOW, RecordFormat
from fairwin.records import Record
from fairwin.rows import Kind, Order


class ArchiveSnapshot(BaseModel):
    """Which archive a window decided from: the one snapshot it read at open, by row count and digest (the same
    rows give the same digest in every backend)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rows: int
    sha256: str


class CellShape(BaseModel):
    """What a cell asks of every stream: two control starts are compared only at the same shape."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_tokens: int | None
    max_tokens: int
    concurrency: int | None
    temperature: float | None


class WindowArchiveKey(BaseModel):
    """window.json's ``archive_key``: what the window's control rows are keyed by besides what its starts observe
    (production's commit, each host's name as the archive keys it, each cell's shape)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    production_commit: str | None
    hosts: dict[str, str]
    cells: dict[str, CellShape]


class Allocation(BaseModel):
    """The Slurm job a window runs inside, as Slurm reported it (kept in window.json)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scheduler: str = "slurm"
    job_id: str
    partition: str
    nodes: list[str]
    exclusive: bool
    hosts: dict[str, str] = Field(default_factory=dict)  # [cluster] hosts bound to its nodes: name -> node


class PlannedStart(BaseModel):
    """One start the rule registers, in run order (a sequential rule lists its maximum)."""

    model_config = ConfigDict(extra="forbid")

    start: str
    kind: Kind
    role: str
    round: int | None = None  # a many-arm window's round


class FamilyPins(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompts_sha256: str | None
    order_sha256: str | None


class ManifestTelemetry(BaseModel):
    """The GPUs the window read, and production's clock cap (with where it was read) to hold the starts to."""

    model_config = ConfigDict(extra="forbid")

    gpu: str | None = None
    production_cap_mhz: float | None = None
    production_cap_from: str | None = None
    production_caps_by_host: dict[str, float | None] | None = None


class PlanOverride(BaseModel):
    """A change the window made to its plan file at load: a ``--set``, or a pin read from a variable."""

    model_config = ConfigDict(extra="forbid")

    key: str  # a TOML dotted key, e.g. roles.B.repo.commit
    value: Any
    variable: str | None = None  # a pin's {env:NAME}: the variable(s) it was read from


class WindowManifest(Record):
    """``fairwin.window/1``."""

    record_format: ClassVar[RecordFormat] = WINDOW
    model_config = ConfigDict(extra="allow")  # a newer fairwin's additions are kept, and read past

    format: Literal["fairwin.window/1"] = "fairwin.window/1"
    window_id: str
    mode: str
    control_role: str
    candidate_role: str
    order: Order
    candidates: list[str] = Field(default_factory=list)  # a many-arm window's candidate roles, in the plan's order
    round_seed: int | None = None  # a many-arm window's seed of its rounds' orders
    starts: list[PlannedStart] = Field(min_length=1)
    plan_path: str
    plan_sha256: str  # the effective plan's: the file's own when nothing overrides it
    plan_file_sha256: str | None = None  # the file's bytes (absent before overrides were recorded)
    plan_overrides: list[PlanOverride] = Field(default_factory=list)  # in the order applied
    rule_id: str
    rule_sha256: str
    archive: str | None = None  # where the window's control starts go: never a password (the store redacts it)
    archive_key: WindowArchiveKey | None = None  # None: written by a fairwin before the archive keyed windows
    archive_snapshot: ArchiveSnapshot | None = None
    power_warnings: list[str] = Field(default_factory=list)
    gates: GateSummary | None = None  # None: opened before the gates' summary was kept
    coordinator: Coordinator | None = None
    families: dict[str, FamilyPins] = Field(default_factory=dict)
    environment: Environment | None = None  # None: a window.json written without one
    production: ProductionDeclaration | None = None  # the snapshot production was taken down as, and its reading
    chain: ChainRecord | None = None
    cluster: Allocation | None = None  # the Slurm job the window ran in, where [cluster] declares a scheduler
    telemetry: ManifestTelemetry = Field(default_factory=ManifestTelemetry)

    @property
    def commit(self) -> str | None:
        """The git commit the window ran (its environment's)."""
        return self.environment.commit if self.environment is not None else None
