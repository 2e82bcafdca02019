"""What a start leaves beside its rows: ``start.json`` (its receipt) and its rows of ``waves.jsonl``.

``start.json`` grows as the start runs: written once, in a ``finally``, with whatever the start
got as far as (a start that failed at its launch has no ``healthy_after_s``). So it is a sparse
record: a field is on disk only once the start set it, and readers ask which are there.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from fairwin.formats import START, WAVE, RecordFormat
from fairwin.records import Record
from fairwin.rows import Kind

#: Where a start's speculative config was read: what the server reported, its argv, or nowhere (accepted).
SpeculativeSource = Literal["server log", "argv", "unobserved"]


class WarmupOutcome(BaseModel):
    """A start's uncounted warm-up waves: how many ran, the server rate of each, and whether it settled."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cell: str
    waves: int
    rates_tps: list[float]
    tolerance_pct: float
    steady: bool | None  # None: the plan runs no warm-up waves


class BusyProcess(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    pid: int
    name: str
    cpu_pct: float


class HostCondition(BaseModel):
    """The host around a start (telemetry/host_condition.py): CPU busy %, load, frequency, memory, and the busiest
    processes; the busy share, the busiest and ``idle`` are null when nothing was sampled (``idle_check_s`` 0)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu_busy_pct: float | None
    cpus: int | None
    load_average: list[float]
    cpu_mhz: list[int]
    memory_available_gib: float
    client_cpus: list[int]
    busiest: list[BusyProcess] | None
    idle: bool | None


class StopRecord(BaseModel):
    """How a start's server (or a worker) stopped: the signal it took, its exit status, the seconds it took."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    signal: str  # "none" (already exited), "SIGTERM" or "SIGKILL"
    returncode: int | None
    seconds: float


class Dialback(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    time: float
    gpu: int
    host: str | None = None
    kind: str  # thermal | power
    reasons: list[str]


class CapChange(BaseModel):
    """The cap moved inside a start: on a GPU (its locked clock, at a sample's time) or in a host's log."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str
    gpu: str | None = None
    before_mhz: float
    after_mhz: float
    time: float | None = None


class StartTelemetry(BaseModel):
    """``start.json``'s ``telemetry``, summarized by telemetry/sampler.py: a start's GPUs, the cap it ran at
    (or why none), its clocks and its dial-backs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    samples: int
    failed_reads: int
    gpus: list[str]
    sm_mhz: dict[str, float] | None  # min, median, max over busy samples
    cap_from: str
    cap_mhz: float | None
    cap_by_gpu: dict[str, float | None]
    names: dict[str, str] = {}  # each GPU's model, by the same keys
    cap_by_host: dict[str, float | None] = {}  # 'here' for fairwin's own host
    cap_changes: list[CapChange] = []
    dialbacks: list[Dialback]
    problems: list[str]


class ContainerReceipt(BaseModel):
    """A container role's (or worker's) container as its runtime reported it after the run: secrets in its env
    as digests, as in production's reading."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    runtime: str  # docker | podman
    name: str
    id: str  # the first 12 hex digits
    image: str
    image_id: str
    env: dict[str, str]
    mounts: list[dict[str, str]]  # each: source, destination, mode
    labels: dict[str, str]


class WorkerReceipt(BaseModel):
    """A worker of a role across hosts, as its start launched it: only what happened to it is set (a worker that
    never launched names its member alone, and its stop when there was one)."""

    model_config = ConfigDict(extra="forbid")

    member: str
    host: str | None = None
    argv: list[str] | None = None
    pid: int | None = None
    ready_after_s: float | None = None
    container: ContainerReceipt | None = None  # a container worker's, as the head's
    slurm_step: str | None = None  # inside a Slurm job, a worker here: its step, as the head's
    identity: dict[str, str] | None = None  # its pinned files' sha256, checked on its host before the launch
    stop: StopRecord | None = None


class StartReceipt(Record):
    """``fairwin.start/1``: what was launched, where, and how the start went (docs/formats.md)."""

    record_format: ClassVar[RecordFormat] = START
    sparse: ClassVar[bool] = True
    model_config = ConfigDict(extra="allow")  # a newer fairwin's additions are read past

    format: Literal["fairwin.start/1"] = "fairwin.start/1"
    start: str
    kind: Kind
    role: str
    # As launched, in the plan's words: {env:NAME} unresolved, values after secret flags ***.
    host: str | None = None
    argv: list[str] = Field(default_factory=list)
    declared_env: dict[str, str] = Field(default_factory=dict)
    env_files: dict[str, str] = Field(default_factory=dict)  # each env file's path and sha256, never its contents
    base_url: str | None = None
    model: str | None = None
    speculative: dict[str, JsonValue] | None = None
    speculative_source: SpeculativeSource | None = None  # where the config was read
    # As the start ran.
    host_before: HostCondition | None = None
    identity: dict[str, str] | None = None
    workers: list[WorkerReceipt] | None = None  # each other member of a role across hosts
    healthy_after_s: float | None = None
    scheduling: dict[str, object] | None = None
    container: ContainerReceipt | None = None  # a container role's
    slurm_step: str | None = None  # inside a Slurm job: the step it ran as ("step 7.2 on node n1, task pid N")
    counters: str | None = None  # the server profile pooled with (metrics/profile.py), and why that one
    counters_reason: str | None = None
    env_check: list[str] | None = None
    warmup: WarmupOutcome | None = None
    telemetry: StartTelemetry | None = None
    greedy_streams: int | None = None
    host_after: HostCondition | None = None
    pooled_rows: int | None = None
    stop: StopRecord | None = None

    def worker(self, member: str) -> WorkerReceipt:
        """The worker's entry (made, naming only the member, when it never got as far as launched)."""
        if self.workers is None:
            self.workers = []
        found = next((entry for entry in self.workers if entry.member == member), None)
        if found is None:
            found = WorkerReceipt(member=member)
            self.workers.append(found)
        return found


class WaveRow(Record):
    """``fairwin.wave/1``: one wave's seed and prompts, its time, and the server's counter deltas over it."""

    record_format: ClassVar[RecordFormat] = WAVE
    model_config = ConfigDict(extra="forbid")

    format: Literal["fairwin.wave/1"] = "fairwin.wave/1"
    start: str
    role: str
    cell: str
    wave: str
    index: int
    repeat: int
    family: str
    seed: int
    prompt_ids: list[str]
    started_unix: float
    seconds: float
    ok: bool
    error: str | None
    deltas: dict[str, float]
