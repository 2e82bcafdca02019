"""A wave: one cell's streams for one repeat and family, at the cell's concurrency.

The server's counters are scraped right before and after, so the wave's delta
contains exactly its own streams. vLLM updates some counters a moment after the
last byte of a stream, so the "after" scrape is repeated until the request count
has caught up (bounded by ``settle_timeout_s``); a server that counts no requests
(llama.cpp) is settled when its busy gauges read 0.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass

import aiohttp
from pydantic import JsonValue

from fairwin.client.prepare import PreparedPrompt, prompt_key
from fairwin.client.sse_transport import StreamTransport
from fairwin.client.stream import StreamRecord, request_body, run_stream_recorded
from fairwin.errors import MetricsError, PromptError, WaveError, WindowError
from fairwin.metrics.scrape import Snapshot, delta, read_exposition, scrape
from fairwin.plan.models import Cell
from fairwin.plan.schedule import WaveSpec
from fairwin.profiles import VLLM, ServerProfile
from fairwin.rows import Kind

SETTLE_POLL_S = 0.05


@dataclass(frozen=True)
class Target:
    """Where a start's server answers and what it calls its model."""

    start: str
    kind: Kind
    role: str
    base_url: str
    model: str
    profile: ServerProfile = VLLM

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/")


@dataclass
class WaveResult:
    spec: WaveSpec
    streams: list[StreamRecord]
    deltas: Snapshot
    started_unix: float
    seconds: float
    error: WindowError | None = None


def endpoint_path(cell: Cell) -> str:
    return "/v1/chat/completions" if cell.endpoint == "chat" else "/v1/completions"


#: vLLM refuses a cache_salt longer than this or containing any of these characters.
SALT_MAX_CHARS = 128
SALT_FORBIDDEN = frozenset("@/\\\0")


def salt(window_id: str, start: str, wave: str, stream: int) -> str:
    """Unique per window, start, wave and stream: no start can hit another's prefix cache.

    Readable when it can be; a sha256 when the readable form would break vLLM's rules.
    """
    readable = f"{window_id}.{start}.{wave.replace('/', '.')}.{stream}"
    if len(readable) <= SALT_MAX_CHARS and not SALT_FORBIDDEN.intersection(readable):
        return readable
    return hashlib.sha256(readable.encode()).hexdigest()


async def _settled_after(
    session: aiohttp.ClientSession, target: Target, before: Snapshot, expected: int, timeout_s: float
) -> Snapshot:
    """The counters once every stream of the wave is in them: the request count has caught up, or (a server
    without one) every busy gauge reads 0."""
    deadline = time.monotonic() + timeout_s
    profile = target.profile
    while True:
        read = await read_exposition(session, target.url, target.model, profile.prefix or "", profile.busy)
        after = read.counters
        # Read for this model: a series exported only under another model_name is as missing as one never exported.
        missing = [name for name in profile.busy if name not in read.gauges]
        if profile.requests and profile.requests not in after:
            missing.insert(0, profile.requests)
        if missing:
            raise MetricsError(
                f"{target.start}: {target.url}/metrics has no {', '.join(missing)}; the {profile.name} profile "
                'pools those counters, so the server must expose them (or set window.counters = "none": client-only)'
            )
        if profile.counts_requests:
            counted = after[profile.requests] - before.get(profile.requests, 0.0)
            if counted >= expected:
                return after
            waiting = f"{counted:g} of {expected} requests counted"
        else:
            busy = {name: value for name, value in read.gauges.items() if value > 0}
            if not busy:
                return after
            waiting = ", ".join(f"{name} = {value:g}" for name, value in busy.items())
        if time.monotonic() >= deadline:
            raise MetricsError(
                f"{target.start}: counters did not settle: {waiting} after {timeout_s:g} s; "
                "raise window.settle_timeout_s or check the server"
            )
        await asyncio.sleep(SETTLE_POLL_S)


async def server_counters(session: aiohttp.ClientSession, target: Target) -> Snapshot:
    """The server's counters, or nothing when the profile reads none."""
    if not target.profile.reads_counters:
        return {}
    return await scrape(session, target.url, target.model, target.profile.prefix or "")


async def run_wave(
    session: aiohttp.ClientSession,
    streams: StreamTransport,
    target: Target,
    window_id: str,
    cell: Cell,
    spec: WaveSpec,
    prepared: dict[str, PreparedPrompt],
    settle_timeout_s: float,
) -> WaveResult:
    """Run every stream of the wave through ``streams``, the counters read through ``session``; a failed stream
    fails the wave but its evidence is returned."""
    url = target.url + endpoint_path(cell)
    records, bodies = _streams(target, window_id, cell, spec, prepared)
    gate = asyncio.Semaphore(cell.concurrency)

    async def one(record: StreamRecord, body: dict[str, JsonValue]) -> StreamRecord:
        async with gate:
            return await run_stream_recorded(streams, url, record, body)

    before = await server_counters(session, target)
    started_unix = time.time()
    t0 = time.perf_counter()
    outcomes = await asyncio.gather(*(one(r, b) for r, b in zip(records, bodies, strict=True)), return_exceptions=True)
    seconds = time.perf_counter() - t0
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, WaveError):
            raise outcome
    failure = next((o for o in outcomes if isinstance(o, WaveError)), None) or _tokenizer_mismatch(target, records)
    if failure is not None:
        return WaveResult(spec, records, {}, started_unix, seconds, error=failure)
    if not target.profile.reads_counters:
        return WaveResult(spec, records, {}, started_unix, seconds)
    after = await _settled_after(session, target, before, len(records), settle_timeout_s)
    return WaveResult(spec, records, delta(before, after), started_unix, seconds)


def _streams(
    target: Target, window_id: str, cell: Cell, spec: WaveSpec, prepared: dict[str, PreparedPrompt]
) -> tuple[list[StreamRecord], list[dict[str, JsonValue]]]:
    """Each stream's record (salted apart from every other stream) and its request body."""
    records: list[StreamRecord] = []
    bodies = []
    for index, prompt in enumerate(spec.prompts):
        ready = prepared[prompt_key(spec.family, prompt.id)]
        record = StreamRecord(
            start=target.start,
            role=target.role,
            cell=spec.cell,
            wave=spec.key,
            repeat=spec.repeat,
            family=spec.family,
            stream=index,
            prompt_id=prompt.id,
            prompt_tokens_expected=ready.tokens,
            seed=spec.seed,
            cache_salt=salt(window_id, target.start, spec.key, index),
            endpoint=cell.endpoint,
            max_tokens=cell.max_tokens,
        )
        records.append(record)
        extra = target.profile.body_fields(cell.extra_body)
        bodies.append(request_body(record, target.model, ready.text, cell.temperature, cell.top_p, extra))
    return records, bodies


def _tokenizer_mismatch(target: Target, records: list[StreamRecord]) -> PromptError | None:
    """A prompt the server counted differently than when it was prepared: roles do not share a tokenizer."""
    for record in records:
        if record.prompt_tokens is not None and record.prompt_tokens != record.prompt_tokens_expected:
            return PromptError(
                f"{target.start}: prompt {record.family}/{record.prompt_id} counted {record.prompt_tokens} "
                f"tokens here but {record.prompt_tokens_expected} when prepared; every role of a window must "
                "share one tokenizer"
            )
    return None
