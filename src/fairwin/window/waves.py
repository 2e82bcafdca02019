"""A healthy start's measurement: the prompts cut once, the warm-up, every cell's waves pooled repeat by
repeat, the GPUs sampled throughout, and the greedy diagnostics where the plan asks for them.

Each wave's streams and counter deltas are appended to the window as soon as the wave ends, so
a later failure loses nothing already measured.
"""

from __future__ import annotations

import asyncio
from contextlib import nullcontext

import aiohttp

from fairwin.client.greedy_probe import diagnose
from fairwin.client.prepare import PreparedPrompt, TokenizeClient, prepare, prompt_key
from fairwin.client.sse_transport import StreamTransport
from fairwin.client.wave import Target, WaveResult, run_wave
from fairwin.directory.start_receipt import StartReceipt, WaveRow
from fairwin.launch.spec import LaunchSpec
from fairwin.plan.schedule import WaveSpec, prompts_sent
from fairwin.pooling.fidelity import judge_wave
from fairwin.pooling.pool import pool_repeat
from fairwin.records import append_records, write_records
from fairwin.rows import PooledRow
from fairwin.telemetry.gpu import HERE, GpuSource, PerHost, remote_source
from fairwin.telemetry.sampler import events_by_repeat, sampling, summarize
from fairwin.window.processes import (
    StartProcess,
    require_running,
    server_log,
)
from fairwin.window.start_context import StartContext
from fairwin.window.streams import append_streams
from fairwin.window.warmup import warm_up_stream, warm_up_waves


async def prepare_prompts(ctx: StartContext, session: aiohttp.ClientSession, target: Target) -> None:
    """Cut every prompt a cell uses to its length, once per window, with the first start's tokenizer."""
    plan = ctx.loaded.plan
    rows: list[PreparedPrompt] = []
    for cell_name, cell in plan.cells.items():
        tokenizer = TokenizeClient(session, target.url, target.model, cell.endpoint, target.profile.tokenize)
        needed = prompts_sent(ctx.schedule[cell_name])
        by_id: dict[str, PreparedPrompt] = {}
        for (family, _), prompt in needed.items():
            ready = await prepare(
                tokenizer, cell_name, family, prompt, cell.prompt_tokens, cell.prompt_tokens_tolerance
            )
            by_id[prompt_key(family, prompt.id)] = ready
            rows.append(ready)
        ctx.prepared[cell_name] = by_id
        ctx.say(f"  prepared {len(by_id)} prompts for {cell_name} at ~{cell.prompt_tokens} tokens")
    write_records(ctx.window.prompts, rows)


def _wave_row(result: WaveResult, target: Target) -> WaveRow:
    return WaveRow(
        start=target.start,
        role=target.role,
        cell=result.spec.cell,
        wave=result.spec.key,
        index=result.spec.index,
        repeat=result.spec.repeat,
        family=result.spec.family,
        seed=result.spec.seed,
        prompt_ids=[p.id for p in result.spec.prompts],
        started_unix=result.started_unix,
        seconds=result.seconds,
        ok=result.error is None,
        error=None if result.error is None else str(result.error),
        deltas=result.deltas,
    )


def _pool(ctx: StartContext, target: Target, cell_name: str, results: list[WaveResult]) -> list[PooledRow]:
    rows = []
    for repeat in range(1, ctx.loaded.plan.window.repeats + 1):
        mine = [r for r in results if r.spec.repeat == repeat]
        rows.append(
            pool_repeat(
                window_id=ctx.window.window_id,
                start=target.start,
                kind=target.kind,
                role=target.role,
                cell=cell_name,
                repeat=repeat,
                deltas=[r.deltas for r in mine],
                streams=[s for r in mine for s in r.streams],
                profile=target.profile,
            )
        )
    return rows


async def _run_waves(
    ctx: StartContext,
    session: aiohttp.ClientSession,
    streams: StreamTransport,
    target: Target,
    processes: list[StartProcess],
    cell_name: str,
    waves: list[WaveSpec],
) -> list[WaveResult]:
    plan = ctx.loaded.plan
    results = []
    for spec in waves:
        result = await run_wave(
            session,
            streams,
            target,
            ctx.window.window_id,
            plan.cells[cell_name],
            spec,
            ctx.prepared[cell_name],
            plan.window.settle_timeout_s,
        )
        judge_wave(result.streams, result.deltas.get(target.profile.decode_sum))
        append_streams(ctx.window, target.start, result.streams)
        append_records(ctx.window.waves, [_wave_row(result, target)])
        # A process that exited mid-wave fails the start, whatever answered the wave in its place.
        require_running(processes, f"role {target.role}, start {target.start}: its measurements")
        if result.error is not None:
            raise result.error
        results.append(result)
        ctx.say(f"  {target.start} {spec.key}: {len(result.streams)} streams in {result.seconds:.1f} s")
        if ctx.feed is not None:
            ctx.feed.emit(
                "wave",
                start=target.start,
                kind=target.kind,
                role=target.role,
                cell=cell_name,
                wave=spec.key,
                seconds=round(result.seconds, 3),
            )
    return results


async def measure(
    ctx: StartContext,
    session: aiohttp.ClientSession,
    streams: StreamTransport,
    target: Target,
    receipt: StartReceipt,
    processes: list[StartProcess],
) -> list[PooledRow]:
    """The warm-up and every cell's waves, the GPUs sampled throughout; the pooled rows carry the start's cap
    and each repeat's dial-backs."""
    plan = ctx.loaded.plan
    directory = ctx.window.start_dir(target.start)
    rows: list[PooledRow] = []
    results: list[WaveResult] = []
    specs = [p.spec for p in processes]
    gpu = await _gpus(ctx, specs)
    paused = ctx.hold_sampler.pause() if ctx.hold_sampler is not None and gpu is not None else nullcontext()
    with paused:  # the start reads the GPUs itself; the hold's sampler waits
        async with sampling(gpu, ctx.window.start_telemetry(target.start), plan.telemetry.interval_s) as sampler:
            await warm_up_stream(ctx, streams, target)
            receipt.warmup = await warm_up_waves(ctx, session, streams, target)
            for cell_name in plan.cells:
                waves = ctx.schedule[cell_name]
                cell_results = await _run_waves(ctx, session, streams, target, processes, cell_name, waves)
                rows.extend(_pool(ctx, target, cell_name, cell_results))
                results += cell_results
    cap_from = plan.telemetry.cap_from
    if sampler is None and cap_from != "log":
        return rows
    logs = {spec.host or HERE: directory / server_log(spec) for spec in specs}
    seen = summarize(sampler, cap_from, logs, plan.telemetry.cap_log_pattern, specs[-1].host or HERE)
    receipt.telemetry = seen
    spans = [(r.spec.cell, r.spec.repeat, r.started_unix, r.seconds) for r in results]
    invalidating = set(plan.telemetry.invalidating_dialbacks)
    events = events_by_repeat([d for d in seen.dialbacks if d.kind in invalidating], spans)
    power = events_by_repeat([d for d in seen.dialbacks if d.kind == "power"], spans)
    known = sampler is not None and any(sample.reasons is not None for sample in sampler.samples)  # else unobserved
    return [
        row.model_copy(
            update={
                "clock_cap_mhz": seen.cap_mhz,
                "clock_caps_by_host": seen.cap_by_host or None,
                "thermal_events": events.get((row.cell, row.repeat), 0) if known else None,
                "power_events": power.get((row.cell, row.repeat), 0) if known else None,
            }
        )
        for row in rows
    ]


async def _gpus(ctx: StartContext, specs: list[LaunchSpec]) -> GpuSource | None:
    """The GPUs of every host the start's processes run on: here through the window's source, a remote host
    through nvidia-smi over SSH; several hosts read together, each sample naming its host."""
    sources: dict[str, GpuSource] = {}
    for spec in specs:
        source = ctx.gpu
        if spec.remote is not None and spec.host is not None:
            source = await asyncio.to_thread(remote_source, spec.host, spec.remote, ctx.loaded.plan.telemetry.gpu)
        if source is not None:
            sources[spec.host or HERE] = source
    if len(specs) == 1:
        return next(iter(sources.values()), None)
    return PerHost(sources) if sources else None


async def diagnose_greedy(ctx: StartContext, session: aiohttp.ClientSession, target: Target, speculative: bool) -> int:
    """The start's greedy diagnostics (client/greedy_probe.py), after its waves and before its server stops."""
    plan = ctx.loaded.plan
    settings = plan.diagnostics.greedy
    assert settings is not None  # only diagnosed starts get here
    cells = settings.cells or [name for name, cell in plan.cells.items() if cell.decision]
    ctx.say(f"  {target.start}: greedy diagnostics on {settings.prompts} prompt(s) of {', '.join(cells)}")
    return await diagnose(
        session,
        target,
        ctx.window.window_id,
        settings,
        ctx.prepared,
        cells,
        ctx.window,
        speculative,
    )
