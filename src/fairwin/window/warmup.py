"""Warming a start up until the server's own rate is steady, before anything is counted.

One short stream pays the first-request costs. It is not enough: within a start the
server's rate climbs across repeats (e2e A/A: s1 1,387 -> 1,634 -> 1,761 tok/s), so
the first repeat of every start would be measured on a server still warming up. After
the stream, the first decision cell's first wave runs again, uncounted, until two
consecutive waves' server rates (from the server's counters, as pooling computes them)
agree within ``window.warmup_tolerance_pct`` (the client's rates, when the server
profile reads no counters), at most ``window.warmup_waves_max``
times. Every warm-up wave is recorded (repeat 0, salted apart from every counted wave)
and the budget counts the maximum.
"""

from __future__ import annotations

import dataclasses

import aiohttp

from fairwin.client.prepare import prompt_key
from fairwin.client.sse_transport import StreamTransport
from fairwin.client.stream import StreamRecord, request_body, run_stream_recorded
from fairwin.client.wave import Target, endpoint_path, run_wave, salt
from fairwin.directory.start_receipt import WarmupOutcome
from fairwin.pooling.pool import client_rate, decode_rate
from fairwin.window.start_context import StartContext
from fairwin.window.streams import append_streams


async def warm_up_stream(ctx: StartContext, streams: StreamTransport, target: Target) -> StreamRecord:
    """One uncounted stream, so no measured wave pays for first-request costs."""
    plan = ctx.loaded.plan
    cell_name = ctx.loaded.plan.first_decision_cell
    cell = plan.cells[cell_name]
    first = ctx.schedule[cell_name][0]
    ready = ctx.prepared[cell_name][prompt_key(first.family, first.prompts[0].id)]
    record = StreamRecord(
        start=target.start,
        role=target.role,
        cell=cell_name,
        wave="warmup",
        repeat=0,
        family=first.family,
        stream=0,
        prompt_id=ready.id,
        prompt_tokens_expected=ready.tokens,
        seed=plan.window.base_seed,
        cache_salt=salt(ctx.window.window_id, target.start, "warmup", 0),
        endpoint=cell.endpoint,
        max_tokens=plan.window.warmup_max_tokens,
    )
    body = request_body(
        record, target.model, ready.text, cell.temperature, cell.top_p, target.profile.body_fields(cell.extra_body)
    )
    try:
        return await run_stream_recorded(streams, target.url + endpoint_path(cell), record, body)
    finally:
        append_streams(ctx.window, target.start, [record])


def steady(rates: list[float], tolerance_pct: float) -> bool:
    return len(rates) >= 2 and abs(rates[-1] / rates[-2] - 1.0) * 100.0 <= tolerance_pct


async def warm_up_waves(
    ctx: StartContext, session: aiohttp.ClientSession, streams: StreamTransport, target: Target
) -> WarmupOutcome:
    """Uncounted waves until the server's rate is steady; what happened, for the start receipt."""
    settings = ctx.loaded.plan.window
    cell_name = ctx.loaded.plan.first_decision_cell
    first = ctx.schedule[cell_name][0]
    rates: list[float] = []
    for number in range(1, settings.warmup_waves_max + 1):
        spec = dataclasses.replace(first, repeat=0, label=f"warmup{number}/{first.family}")
        result = await run_wave(
            session,
            streams,
            target,
            ctx.window.window_id,
            ctx.loaded.plan.cells[cell_name],
            spec,
            ctx.prepared[cell_name],
            settings.settle_timeout_s,
        )
        append_streams(ctx.window, target.start, result.streams)
        if result.error is not None:
            raise result.error
        profile = target.profile
        if profile.reads_counters:
            rate = decode_rate(result.deltas, profile, len(result.streams))
        else:
            rate = client_rate(result.streams)
        if rate is not None:
            rates.append(rate)
        if steady(rates, settings.warmup_tolerance_pct):
            break
    outcome = WarmupOutcome(
        cell=cell_name,
        waves=len(rates),
        rates_tps=[round(r, 2) for r in rates],
        tolerance_pct=settings.warmup_tolerance_pct,
        steady=steady(rates, settings.warmup_tolerance_pct) if settings.warmup_waves_max else None,
    )
    if rates:
        trail = " -> ".join(f"{r:.0f}" for r in rates)
        state = "steady" if outcome.steady else f"NOT steady within {settings.warmup_tolerance_pct:g} %"
        ctx.say(f"  warm-up: {len(rates)} uncounted waves of {cell_name}, server rate {trail} tok/s ({state})")
    return outcome
