"""Sampling the GPUs through a start, and what the samples say: its clock cap and its dial-backs.

The sampler runs beside the start's warm-up and waves, one sample of every GPU each
``interval_s``, appended to ``starts/sN/telemetry.jsonl`` as it goes (a later failure
loses nothing). A failed read is recorded and sampling goes on: telemetry observes,
it never stops a window. The start's **cap** is read as the plan says: ``locked`` (the
SM clock while the clocks were held by a lock or an applications-clock setting, busy
and not dialled back: one value, a second being a change of cap), ``applications`` (the applications clock), or
``log`` (a pattern over each process's log, on every host the start runs on: no GPU
source needed). Every GPU and every host must agree, else the start has no cap and says
why. A **change of cap** inside a start (a watchdog that re-locks a lower clock, a log
that prints a second cap) is recorded and leaves that GPU or host without a cap. A
**dial-back** is a sample whose reasons include a thermal or power slowdown while the
one before did not.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import statistics
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict

from fairwin.directory.start_receipt import CapChange, Dialback, StartTelemetry
from fairwin.errors import InputError
from fairwin.formats import TELEMETRY, RecordFormat
from fairwin.records import Record, append_records
from fairwin.telemetry.gpu import DIALBACK, HERE, IDLE, LOCKED, GpuSample, GpuSource


class TelemetryRow(Record):
    """``fairwin.telemetry/1``: a GPU sample (:class:`GpuSample`'s fields), or a read that failed (``error``)."""

    record_format: ClassVar[RecordFormat] = TELEMETRY
    sparse: ClassVar[bool] = True  # a failed read has its time and error, nothing else
    model_config = ConfigDict(extra="forbid")

    format: Literal["fairwin.telemetry/1"] = "fairwin.telemetry/1"
    time: float
    error: str | None = None
    gpu: int | None = None
    host: str | None = None
    uuid: str | None = None
    name: str | None = None
    sm_mhz: float | None = None
    max_sm_mhz: float | None = None
    applications_mhz: float | None = None
    reasons: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None


class Sampler:
    def __init__(self, source: GpuSource, path: Path, interval_s: float) -> None:
        self.source, self.path, self.interval_s = source, path, interval_s
        self.samples: list[GpuSample] = []
        self.failed: list[str] = []
        self.paused = False  # while another sampler reads the same GPUs (a start's own, inside the hold's)

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        """No samples while the body runs: the GPUs are read once at a time, not twice."""
        self.paused = True
        try:
            yield
        finally:
            self.paused = False

    async def read_now(self) -> None:
        """One sample of every GPU now: the loop's, the last at a body's end, and one between them where a moment
        must be seen however short (a start's servers just stopped)."""
        try:
            found = await asyncio.to_thread(self.source.sample)
        except (InputError, OSError) as exc:
            self.failed.append(str(exc))
            append_records(self.path, [TelemetryRow(time=time.time(), error=str(exc))])
            return
        self.samples.extend(found)
        append_records(self.path, [TelemetryRow.model_validate(s.model_dump()) for s in found])

    async def _loop(self) -> None:
        while True:
            if not self.paused:
                await self.read_now()
            await asyncio.sleep(self.interval_s)


@contextlib.asynccontextmanager
async def sampling(source: GpuSource | None, path: Path, interval_s: float) -> AsyncIterator[Sampler | None]:
    """Sample while the body runs (and once more at its end); None when there is no source."""
    if source is None:
        yield None
        return
    sampler = Sampler(source, path, interval_s)
    task = asyncio.create_task(sampler._loop())
    try:
        yield sampler
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    await sampler.read_now()


def gpu_key(sample: GpuSample) -> str:
    """How a GPU is named in a summary (``cap_by_gpu``) and between starts: its UUID, after its host where the
    sample names one."""
    gpu = sample.uuid or str(sample.gpu)
    return f"{sample.host}/{gpu}" if sample.host else gpu


def summarize(
    sampler: Sampler | None,
    cap_from: str,
    logs: Mapping[str, Path] | None = None,
    pattern: str | None = None,
    host: str = HERE,
) -> StartTelemetry:
    """The start's cap (from its GPUs' samples, or from each host's log in ``logs``), its changes, its clocks and
    its dial-backs; without a sampler only a log can give the cap. ``host`` names the host of samples that
    name none (a start on one host)."""
    samples = sampler.samples if sampler is not None else []
    by_gpu: dict[str, list[GpuSample]] = {}
    for sample in samples:
        by_gpu.setdefault(gpu_key(sample), []).append(sample)
    busy = [s.sm_mhz for s in samples if s.sm_mhz is not None and not (s.reasons or 0) & IDLE]
    failed = sampler.failed if sampler is not None else []
    problems = [f"{len(failed)} failed reads (first: {failed[0]})"] if failed else []
    changes: list[CapChange] = []
    cap_by_gpu = {gpu: _cap(gpu_samples, cap_from, changes, host) for gpu, gpu_samples in by_gpu.items()}
    if cap_from == "log":
        cap_by_host = _caps_from_logs(logs or {}, pattern, changes, problems)
        cap = _agreed(cap_by_host, "hosts", problems)
    else:
        cap_by_host = _by_host(by_gpu, cap_by_gpu, host)
        cap = _agreed(cap_by_gpu, "GPUs", problems) if cap_by_gpu else None
    problems += [
        f"the cap changed inside the start on {_where(c)}: {c.before_mhz:g} -> {c.after_mhz:g} MHz" for c in changes
    ]
    return StartTelemetry(
        source=sampler.source.name if sampler is not None else "none",
        samples=len(samples),
        failed_reads=len(failed),
        gpus=list(by_gpu),
        sm_mhz={"min": min(busy), "median": statistics.median(busy), "max": max(busy)} if busy else None,
        cap_from=cap_from,
        cap_mhz=cap,
        cap_by_gpu=cap_by_gpu,
        cap_by_host=cap_by_host,
        cap_changes=changes,
        names={gpu: gpu_samples[-1].name for gpu, gpu_samples in by_gpu.items()},
        dialbacks=dialbacks(samples),
        problems=problems,
    )


def _where(change: CapChange) -> str:
    return f"GPU {change.gpu}" if change.gpu is not None else f"host {change.host} (its log)"


def _agreed(caps: Mapping[str, float | None], what: str, problems: list[str]) -> float | None:
    """The one cap every GPU (or host) ran at; None, with the reason, when they disagree or one has none."""
    values = set(caps.values())
    if len(values) == 1:
        return values.pop()
    if caps:
        problems.append(f"the {what} disagree on the cap: {dict(caps)}; the start has none")
    return None


def _by_host(
    by_gpu: Mapping[str, list[GpuSample]], cap_by_gpu: Mapping[str, float | None], host: str
) -> dict[str, float | None]:
    """Each host's cap: its GPUs' one cap, None where they disagree or have none."""
    grouped: dict[str, set[float | None]] = {}
    for gpu, gpu_samples in by_gpu.items():
        grouped.setdefault(gpu_samples[-1].host or host, set()).add(cap_by_gpu[gpu])
    return {host: caps.pop() if len(caps) == 1 else None for host, caps in sorted(grouped.items())}


def _cap(samples: list[GpuSample], cap_from: str, changes: list[CapChange], host: str) -> float | None:
    if cap_from == "applications":
        values = [s.applications_mhz for s in samples if s.applications_mhz is not None]
        return statistics.mode(values) if values else None
    if cap_from != "locked":
        return None
    held = [
        (s, s.sm_mhz)
        for s in sorted(samples, key=lambda s: s.time)
        if s.sm_mhz is not None and s.reasons is not None and s.reasons & LOCKED and not s.reasons & (IDLE | DIALBACK)
    ]
    moved = [
        CapChange(
            host=after.host or host, gpu=after.uuid or str(after.gpu), before_mhz=was, after_mhz=now, time=after.time
        )
        for (_, was), (after, now) in itertools.pairwise(held)
        if was != now
    ]
    changes += moved
    return None if moved or not held else held[0][1]


def _caps_from_logs(
    logs: Mapping[str, Path], pattern: str | None, changes: list[CapChange], problems: list[str]
) -> dict[str, float | None]:
    """Each host's cap from its process's log: every line the pattern matches, in order; a second value is a
    change of cap (recorded; that host then has none)."""
    if pattern is None or not logs:
        problems.append("cap_from = 'log' needs the servers' logs and telemetry.cap_log_pattern")
        return {}
    found: dict[str, float | None] = {}
    for host, log in sorted(logs.items()):
        matches = re.findall(pattern, log.read_text(errors="replace")) if log.exists() else []
        values = [float(m if isinstance(m, str) else m[0]) for m in matches]
        if not values:
            problems.append(f"host {host}'s log has no line matching {pattern!r}")
            found[host] = None
            continue
        moved = [
            CapChange(host=host, gpu=None, before_mhz=a, after_mhz=b, time=None)
            for a, b in itertools.pairwise(values)
            if a != b
        ]
        changes += moved
        found[host] = None if moved else values[0]
    return found


def dialbacks(samples: Sequence[GpuSample]) -> list[Dialback]:
    """Each GPU's dial-backs among ``samples``: a sample slowed for heat or power where that GPU's one before
    was not (its first sample counts when it is slowed)."""
    by_gpu: dict[str, list[GpuSample]] = {}
    for sample in samples:
        by_gpu.setdefault(gpu_key(sample), []).append(sample)
    found = []
    for gpu_samples in by_gpu.values():
        before = False
        for sample in sorted(gpu_samples, key=lambda s: s.time):
            kind = sample.dialback
            if kind is not None and not before:
                found.append(
                    Dialback(time=sample.time, gpu=sample.gpu, host=sample.host, kind=kind, reasons=sample.reason_names)
                )
            before = kind is not None
    return found


def events_by_repeat(dialbacks: Sequence[Dialback], waves: Sequence[tuple[str, int, float, float]]) -> dict[Any, int]:
    """(cell, repeat) -> dial-backs, each counted in the wave it fell in, or the next one (the last after all)."""
    counted: dict[Any, int] = {}
    ordered = sorted(waves, key=lambda w: w[2])
    for event in dialbacks:
        chosen = next((w for w in ordered if event.time <= w[2] + w[3]), ordered[-1] if ordered else None)
        if chosen is not None:
            counted[(chosen[0], chosen[1])] = counted.get((chosen[0], chosen[1]), 0) + 1
    return counted
