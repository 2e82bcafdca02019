"""Sampling the GPUs through a start, and what the samples say: its clock cap and its dial-backs.

The sampler runs beside the start's warm-up and waves, one sample of every GPU each
``interval_s``, appended to ``starts/sN/telemetry.jsonl`` as it goes (a later failure
loses nothing). A failed read is recorded and sampling goes on: telemetry observes,
it never stops a window. The start's **cap** is read as the plan says: ``locked`` (the
highest SM clock while the clocks were held by a lock or an applications-clock
setting, busy and not dialled back), ``applications`` (the applications clock), or
``log`` (a pattern over the server's log). Every GPU must agree, else the start has
no cap and says why. A **dial-back** is a sample whose reasons include a thermal or
power slowdown while the one before did not.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import statistics
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from fairwin.durable import append_jsonl
from fairwin.errors import InputError
from fairwin.telemetry.gpu import DIALBACK, IDLE, LOCKED, GpuSample, GpuSource
from fairwin.vocabulary import TELEMETRY


class Dialback(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    time: float
    gpu: int
    host: str | None = None
    kind: str  # thermal | power
    reasons: list[str]


class StartTelemetry(BaseModel):
    """A start's GPUs, summarized: the cap it ran at (or why none), its clocks and its dial-backs."""

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
    dialbacks: list[Dialback]
    problems: list[str]


class Sampler:
    def __init__(self, source: GpuSource, path: Path, interval_s: float) -> None:
        self.source, self.path, self.interval_s = source, path, interval_s
        self.samples: list[GpuSample] = []
        self.failed: list[str] = []

    async def _read_once(self) -> None:
        try:
            found = await asyncio.to_thread(self.source.sample)
        except (InputError, OSError) as exc:
            self.failed.append(str(exc))
            append_jsonl(self.path, [{"format": TELEMETRY.id, "time": time.time(), "error": str(exc)}])
            return
        self.samples.extend(found)
        append_jsonl(self.path, [{"format": TELEMETRY.id, **s.model_dump()} for s in found])

    async def _loop(self) -> None:
        while True:
            await self._read_once()
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
    await sampler._read_once()


def summarize(sampler: Sampler, cap_from: str, log: Path | None = None, pattern: str | None = None) -> StartTelemetry:
    by_gpu: dict[str, list[GpuSample]] = {}
    for sample in sampler.samples:
        gpu = sample.uuid or str(sample.gpu)
        by_gpu.setdefault(f"{sample.host}/{gpu}" if sample.host else gpu, []).append(sample)
    busy = [s.sm_mhz for s in sampler.samples if s.sm_mhz is not None and not (s.reasons or 0) & IDLE]
    problems = [f"{len(sampler.failed)} failed reads (first: {sampler.failed[0]})"] if sampler.failed else []
    cap_by_gpu = {gpu: _cap(samples, cap_from) for gpu, samples in by_gpu.items()}
    cap = None
    if cap_from == "log":
        cap = _cap_from_log(log, pattern, problems)
    elif cap_by_gpu:
        caps = set(cap_by_gpu.values())
        if len(caps) == 1:
            cap = caps.pop()
        else:
            problems.append(f"the GPUs disagree on the cap: {cap_by_gpu}; the start has none")
    return StartTelemetry(
        source=sampler.source.name, samples=len(sampler.samples), failed_reads=len(sampler.failed), gpus=list(by_gpu),
        sm_mhz={"min": min(busy), "median": statistics.median(busy), "max": max(busy)} if busy else None,
        cap_from=cap_from, cap_mhz=cap, cap_by_gpu=cap_by_gpu,
        names={gpu: samples[-1].name for gpu, samples in by_gpu.items()},
        dialbacks=[d for samples in by_gpu.values() for d in _dialbacks(samples)], problems=problems,
    )  # fmt: skip


def _cap(samples: list[GpuSample], cap_from: str) -> float | None:
    if cap_from == "applications":
        values = [s.applications_mhz for s in samples if s.applications_mhz is not None]
        return statistics.mode(values) if values else None
    if cap_from != "locked":
        return None
    held = [s.sm_mhz for s in samples if s.sm_mhz is not None and s.reasons is not None
            and s.reasons & LOCKED and not s.reasons & (IDLE | DIALBACK)]  # fmt: skip
    return max(held) if held else None


def _cap_from_log(log: Path | None, pattern: str | None, problems: list[str]) -> float | None:
    if log is None or pattern is None or not log.exists():
        problems.append("cap_from = 'log' needs the server's log and telemetry.cap_log_pattern")
        return None
    matches = re.findall(pattern, log.read_text(errors="replace"))
    if not matches:
        problems.append(f"the server's log has no line matching {pattern!r}")
        return None
    return float(matches[-1] if isinstance(matches[-1], str) else matches[-1][0])


def _dialbacks(samples: list[GpuSample]) -> list[Dialback]:
    found, before = [], False
    for sample in sorted(samples, key=lambda s: s.time):
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
