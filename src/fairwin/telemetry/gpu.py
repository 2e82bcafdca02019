"""What the GPUs did: clocks, clock-event (throttle) reasons, temperature, power, and their compute processes.

Two sources give the same :class:`GpuSample`: NVML through nvidia-ml-py where fairwin
runs on the GPU host, and ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits``
elsewhere (or where NVML cannot load). The clock-event reasons are NVML's bitmask;
nvidia-smi prints it as ``clocks_event_reasons.active`` (``clocks_throttle_reasons.active``
before R535), a hex number. A thermal or power slowdown is a **dial-back**.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from fairwin.commands import runner
from fairwin.errors import InputError, SchedulerError
from fairwin.launch.scheduler import on_node
from fairwin.plan.hosts import Place, SlurmNode

#: NVML's clock-event reason bits (nvmlClocksEventReason*), by the names nvidia-smi prints.
REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",  # also clocks locked with `nvidia-smi -lgc`
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
THERMAL = 0x20 | 0x40
POWER = 0x4 | 0x8 | 0x80
#: The reasons that dial the clock back: a start during which one began is not at its cap.
DIALBACK = THERMAL | POWER
LOCKED = 0x2
IDLE = 0x1

FIELDS = (
    "index",
    "uuid",
    "name",
    "clocks.sm",
    "clocks.max.sm",
    "clocks.applications.graphics",
    "clocks_event_reasons.active",
    "temperature.gpu",
    "power.draw",
    "power.limit",
)
#: Drivers before R535 name the reasons field so.
OLD_REASONS_FIELD = "clocks_throttle_reasons.active"


#: fairwin's own host, wherever telemetry, caps and receipts name hosts.
HERE = "here"


class GpuSample(BaseModel):
    """One GPU at one moment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time: float
    gpu: int
    host: str | None = None  # set when a start's processes span hosts ("here": fairwin's own)
    uuid: str
    name: str
    sm_mhz: float | None
    max_sm_mhz: float | None
    applications_mhz: float | None
    reasons: int | None  # the clock-event bitmask; None when the source could not read it
    temperature_c: float | None
    power_w: float | None
    power_limit_w: float | None

    @property
    def reason_names(self) -> list[str]:
        return [name for bit, name in REASONS.items() if self.reasons is not None and self.reasons & bit]

    @property
    def dialback(self) -> str | None:
        """'thermal' or 'power' when the clock is being dialled back, else None."""
        if self.reasons is None:
            return None
        if self.reasons & THERMAL:
            return "thermal"
        return "power" if self.reasons & POWER else None


def _number(text: str) -> float | None:
    """nvidia-smi's value, or None for its '[N/A]', 'N/A', '[Not Supported]' and the like."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        return None


def _reasons(text: str) -> int | None:
    text = text.strip()
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return None


def parse_query(text: str, when: float) -> list[GpuSample]:
    """Samples from ``nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits`` (FIELDS in this order)."""
    samples = []
    for number, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row or not "".join(row).strip():
            continue
        if len(row) != len(FIELDS):
            raise InputError(f"nvidia-smi line {number} has {len(row)} fields, not {len(FIELDS)}: {','.join(row)}")
        index = _number(row[0])
        if index is None:
            raise InputError(f"nvidia-smi line {number}: no GPU index in {row[0]!r}")
        samples.append(
            GpuSample(
                time=when,
                gpu=int(index),
                uuid=row[1].strip(),
                name=row[2].strip(),
                sm_mhz=_number(row[3]),
                max_sm_mhz=_number(row[4]),
                applications_mhz=_number(row[5]),
                reasons=_reasons(row[6]),
                temperature_c=_number(row[7]),
                power_w=_number(row[8]),
                power_limit_w=_number(row[9]),
            )
        )
    return samples


class ComputeProcess(BaseModel):
    """A process computing on a GPU, as nvidia-smi or NVML lists it (the host: where PerHost read it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu_uuid: str
    pid: int
    name: str = ""
    used_mib: float | None = None
    host: str | None = None


def parse_compute_apps(text: str) -> list[ComputeProcess]:
    """``nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader,nounits``."""
    return [
        ComputeProcess(
            gpu_uuid=row[0].strip(),
            pid=int(row[1]),
            name=row[2].strip(),
            used_mib=_number(row[3]) if len(row) > 3 else None,
        )
        for row in csv.reader(io.StringIO(text))
        if len(row) >= 3 and row[1].strip().isdigit()
    ]


class GpuSource(Protocol):
    name: str

    def sample(self) -> list[GpuSample]: ...

    def compute_processes(self) -> list[ComputeProcess]: ...


Runner = Callable[[list[str]], str]  # runs a command, returns its stdout, raises InputError when it fails


def run_here(argv: list[str], timeout_s: float = 10.0) -> str:
    try:
        done = runner().run(argv, timeout_s=timeout_s)
    except (OSError, TimeoutError) as exc:
        raise InputError(f"{argv[0]} could not run: {exc}") from None
    if done.status != 0:
        raise InputError(f"{' '.join(argv)} exited {done.status}: {(done.err or done.out).strip()[:200]}")
    return done.out


class NvidiaSmi:
    """``nvidia-smi``, run here or (with another runner) on a role's host over SSH."""

    name = "nvidia-smi"

    def __init__(self, command: str = "nvidia-smi", runner: Runner = run_here, where: str = "") -> None:
        self.command, self.runner = command, runner
        self.name = f"nvidia-smi{where}"
        self.reasons_field = FIELDS[6]

    def _run(self, *args: str) -> str:
        return self.runner([self.command, *args])

    def sample(self) -> list[GpuSample]:
        fields = ",".join((*FIELDS[:6], self.reasons_field, *FIELDS[7:]))
        try:
            text = self._run(f"--query-gpu={fields}", "--format=csv,noheader,nounits")
        except InputError as exc:
            if self.reasons_field == OLD_REASONS_FIELD or "clocks_event_reasons" not in str(exc):
                raise
            self.reasons_field = OLD_REASONS_FIELD  # an older driver: ask by the old name from now on
            return self.sample()
        return parse_query(text, time.time())

    def compute_processes(self) -> list[ComputeProcess]:
        text = self._run("--query-compute-apps=gpu_uuid,pid,process_name,used_memory", "--format=csv,noheader,nounits")
        return parse_compute_apps(text)


def remote_source(name: str, host: Place, setting: str) -> GpuSource | None:
    """nvidia-smi on a role's host over SSH, or on its Slurm node through srun: NVML reads only the GPUs of the
    host fairwin runs on. With 'auto', a host without nvidia-smi has no source (its caps unobserved); with 'nvml'
    or 'nvidia-smi' that is an error."""
    if setting == "none":
        return None
    if isinstance(host, SlurmNode):
        source: NvidiaSmi = NvidiaSmi("nvidia-smi", _node_runner(host), where=f" on host {name} (node {host.node})")
    else:
        from fairwin.launch.ssh import runner  # asyncssh only where a role runs remotely

        source = NvidiaSmi(host.nvidia_smi, runner(name, host), where=f" on host {name}")
    try:
        source.sample()
    except InputError:
        if setting == "auto":
            return None
        raise
    return source


def _node_runner(node: SlurmNode) -> Callable[[list[str]], str]:
    """Reads on a node of the window's Slurm job, each one srun there: its stdout, or InputError."""

    def run(argv: list[str]) -> str:
        try:
            return on_node(node.job_id, node.node, argv)
        except SchedulerError as exc:
            raise InputError(f"on node {node.node}: {exc}") from None

    return run


class PerHost:
    """The GPUs of every host a start runs on, read one host after the other; each sample names its host."""

    def __init__(self, sources: dict[str, GpuSource]) -> None:
        self.sources = sources
        self.name = " + ".join(source.name for source in sources.values())

    def sample(self) -> list[GpuSample]:
        return [s.model_copy(update={"host": host}) for host, source in self.sources.items() for s in source.sample()]

    def compute_processes(self) -> list[ComputeProcess]:
        return [
            p.model_copy(update={"host": host})
            for host, source in self.sources.items()
            for p in source.compute_processes()
        ]
