"""One start: launch a role, prove it healthy, warm it, run every cell's waves, stop it.

Each wave's streams and counter deltas are appended to the window as soon as the
wave ends, so a later failure loses nothing already measured. The server is
stopped in a ``finally``: on success, on error and on cancellation (Ctrl-C).
"""

from __future__ import annotations

import asyncio
from contextlib import nullcontext
from dataclasses import replace

import aiohttp

from fairwin.client.greedy_probe import diagnose
from fairwin.client.prepare import PreparedPrompt, TokenizeClient, prepare, prompt_key
from fairwin.client.sse_transport import StreamTransport
from fairwin.client.wave import Target, WaveResult, run_wave
from fairwin.decision.registry import get_rule
from fairwin.directory.journal import start_step
from fairwin.directory.start_receipt import StartReceipt, WaveRow, WorkerReceipt
from fairwin.launch.spec import LaunchSpec
from fairwin.metrics.profile import choose_profile
from fairwin.plan.schedule import StartSpec, WaveSpec, prompts_sent
from fairwin.pooling.fidelity import judge_wave
from fairwin.pooling.pool import pool_repeat
from fairwin.production.live import LiveProduction
from fairwin.production.live_check import compares_live
from fairwin.production.runtime_checks import await_reported_config, check_reported_speculative, check_speculative
from fairwin.profiles import CLIENT_ONLY
from fairwin.records import append_records, write_record, write_records
from fairwin.rows import PooledRow
from fairwin.telemetry.gpu import HERE, GpuSource, PerHost, remote_source
from fairwin.telemetry.host_condition import condition, not_idle_warning
from fairwin.telemetry.sampler import events_by_repeat, sampling, summarize
from fairwin.transport import api_headers, client_session
from fairwin.window.preflight import check_counters
from fairwin.window.processes import (
    StartProcess,
    check_envs,
    check_identities,
    launch_all,
    require_running,
    server_log,
    start_processes,
    stop_all,
)
from fairwin.window.start_context import StartContext
from fairwin.window.streams import append_streams
from fairwin.window.warmup import warm_up_stream, warm_up_waves


async def _prepare_prompts(ctx: StartContext, session: aiohttp.ClientSession, target: Target) -> None:
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


async def _measure(
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


def _receipt(ctx: StartContext, start: StartSpec, spec: LaunchSpec) -> StartReceipt:
    """start.json as it begins: what is launched, where, and its speculative config (checked, or refused)."""
    plan = ctx.loaded.plan
    speculative = check_speculative(
        start.role, plan.roles[start.role].speculative, spec.argv, plan.runtime.standard_verification
    )
    return StartReceipt(
        start=start.name,
        kind=start.kind,
        role=start.role,
        host=spec.host,
        argv=spec.shown_argv,
        declared_env=spec.shown_env,
        env_files=spec.env_files,
        base_url=spec.base_url,
        model=spec.model,
        speculative=speculative,
    )


async def run_start(ctx: StartContext, start: StartSpec) -> list[PooledRow]:
    plan = ctx.loaded.plan
    directory = ctx.window.start_dir(start.name)
    processes = start_processes(ctx.site, start.role, directory, ctx.launcher, (ctx.window.window_id, start.name))
    head = processes[-1]
    spec = head.spec
    receipt = _receipt(ctx, start, spec)
    target = Target(
        start=start.name,
        kind=start.kind,
        role=start.role,
        base_url=spec.base_url,
        model=spec.model,
        profile=ctx.profile or CLIENT_ONLY,  # until its server's /metrics is read
    )
    timeout = aiohttp.ClientTimeout(total=plan.window.request_timeout_s)
    rows: list[PooledRow] = []
    try:
        receipt.host_before = await condition(plan.window.idle_check_s)
        warning = not_idle_warning(start.name, receipt.host_before)
        if warning:
            ctx.say(f"  warning: {warning}")
        identity = await check_identities(processes)
        if "head" in identity:
            receipt.identity = identity.pop("head")
        workers = f" after {len(processes) - 1} worker(s)" if len(processes) > 1 else ""
        ctx.say(f"{start.name} ({start.kind}, role {start.role}): launching {spec.argv[0]}{workers}")
        # Journaled before and after: a fairwin killed here leaves what `fairwin recover` needs to stop it.
        if launched := await launch_all(ctx.window, start_step(start.name), processes):
            receipt.workers = [_pinned(worker, identity) for worker in launched]
        headers = api_headers(plan.roles[start.role].api_key_env, f"roles.{start.role}.api_key_env")
        streams = StreamTransport(headers, plan.window.request_timeout_s)
        async with client_session(timeout, headers) as session, streams:
            receipt.healthy_after_s = healthy = await head.handle.wait_healthy(session)
            await head.prove_ours()  # what answered is the server launched, not a holder of its port
            receipt.scheduling = head.handle.scheduling
            receipt.container = head.handle.described()
            ctx.say(f"  healthy after {healthy:.1f} s")
            target = await _choose_profile(ctx, session, target, receipt)
            await _runtime_checks(ctx, start, processes, receipt)
            if not ctx.prepared:
                await _prepare_prompts(ctx, session, target)
            measured = await _measure(ctx, session, streams, target, receipt, processes)
            if start.name in ctx.greedy_starts:
                receipt.greedy_streams = await _diagnose(ctx, session, target, bool(receipt.speculative))
            require_running(processes, f"role {start.role}, start {start.name}: its measurements")
            rows = measured
            receipt.host_after = await condition(plan.window.idle_check_s)
        append_records(ctx.window.pooled, rows)
        return rows
    finally:
        receipt.pooled_rows = len(rows)
        try:
            try:
                await _before_stop(ctx, start, rows)
            finally:
                await _stop(ctx, processes, receipt)
        finally:
            write_record(ctx.window.start_receipt(start.name), receipt)


def _pinned(worker: WorkerReceipt, identity: dict[str, dict[str, str]]) -> WorkerReceipt:
    """The worker's receipt with its pinned files' digests, where it pins any (else it says nothing of them)."""
    return worker.model_copy(update={"identity": identity[worker.member]}) if worker.member in identity else worker


async def _runtime_checks(
    ctx: StartContext, start: StartSpec, processes: list[StartProcess], receipt: StartReceipt
) -> None:
    """The running server's speculative config (what it reports), and every process's environment, against the
    declaration and, where the role derives from it, production as it ran."""
    plan, head = ctx.loaded.plan, processes[-1]
    live = _live(ctx, start.role)
    await await_reported_config(head.spec, head.log)
    receipt.speculative, receipt.speculative_source = check_reported_speculative(
        head.spec, head.log, plan.roles[start.role].speculative, plan.runtime, live.member("head") if live else None
    )
    if plan.runtime.check_env:
        receipt.env_check = await check_envs(processes, live)


async def _choose_profile(
    ctx: StartContext, session: aiohttp.ClientSession, target: Target, receipt: StartReceipt
) -> Target:
    """The start's target with the profile its server exports, which the window's rule can decide on."""
    setting = ctx.loaded.plan.window.counters
    where = f"role {target.role}, start {target.start}"
    chosen = await choose_profile(session, target.url, setting, ctx.profile, where)
    check_counters(chosen.profile, get_rule(ctx.loaded.plan.window.rule), chosen.reason)
    if ctx.profile is None and setting == "auto":
        ctx.say(f"  counters: {chosen.profile.name} ({chosen.reason})")
    ctx.profile = chosen.profile
    receipt.counters, receipt.counters_reason = chosen.profile.name, chosen.reason
    return replace(target, profile=chosen.profile)


async def _stop(ctx: StartContext, processes: list[StartProcess], receipt: StartReceipt) -> None:
    """Every process of the start stopped, each stop in its receipt; then the GPUs read as they are let go."""
    for process, record in await stop_all(processes):
        if process is processes[-1]:  # the head
            receipt.stop = record
        else:
            receipt.worker(process.spec.member).stop = record
    if ctx.hold_sampler is not None:  # the GPUs the next start inherits: every gap is seen, however short
        await ctx.hold_sampler.read_now()


async def _before_stop(ctx: StartContext, start: StartSpec, rows: list[PooledRow]) -> None:
    """The window's hook at the end of a start that measured, while its servers still hold the hardware (a chained
    window's placeholders, where this start is its last: the runbook's placeholders before the first fence).
    A failure is raised after the servers stop (the caller's ``finally``)."""
    if ctx.before_stop is not None and rows:
        await ctx.before_stop(start)


async def _diagnose(ctx: StartContext, session: aiohttp.ClientSession, target: Target, speculative: bool) -> int:
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


def _live(ctx: StartContext, role: str) -> LiveProduction | None:
    """Production's reading, where this role is compared with it."""
    return ctx.live if ctx.live is not None and compares_live(ctx.site, role) else None
