"""One start: launch a role, prove it healthy, warm it, run every cell's waves, stop it.

Each wave's streams and counter deltas are appended to the window as soon as the
wave ends, so a later failure loses nothing already measured. The server is
stopped in a ``finally``: on success, on error and on cancellation (Ctrl-C).
"""

from __future__ import annotations

from dataclasses import replace

import aiohttp

from fairwin.client.sse_transport import StreamTransport
from fairwin.client.wave import Target
from fairwin.directory.journal import start_step
from fairwin.directory.start_receipt import StartReceipt, WorkerReceipt
from fairwin.launch.slurm_step import SlurmStep
from fairwin.launch.spec import LaunchSpec
from fairwin.metrics.profile import choose_profile
from fairwin.plan.schedule import StartSpec
from fairwin.production.live import LiveProduction
from fairwin.production.live_check import compares_live
from fairwin.production.runtime_checks import await_reported_config, check_reported_speculative, check_speculative
from fairwin.profiles import CLIENT_ONLY
from fairwin.records import append_records, write_record
from fairwin.rows import PooledRow
from fairwin.rules.registry import get_rule
from fairwin.telemetry.host_condition import condition, not_idle_warning
from fairwin.transport import api_headers, client_session
from fairwin.window.preflight import check_counters
from fairwin.window.processes import (
    ServerHandle,
    StartProcess,
    check_envs,
    check_identities,
    launch_all,
    require_running,
    start_processes,
    stop_all,
)
from fairwin.window.start_context import StartContext
from fairwin.window.waves import diagnose_greedy, measure, prepare_prompts


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
            _ran_as(receipt, head.handle)
            ctx.say(f"  healthy after {healthy:.1f} s")
            target = await _choose_profile(ctx, session, target, receipt)
            await _runtime_checks(ctx, start, processes, receipt)
            if not ctx.prepared:
                await prepare_prompts(ctx, session, target)
            measured = await measure(ctx, session, streams, target, receipt, processes)
            if start.name in ctx.greedy_starts:
                receipt.greedy_streams = await diagnose_greedy(ctx, session, target, bool(receipt.speculative))
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


def _live(ctx: StartContext, role: str) -> LiveProduction | None:
    """Production's reading, where this role is compared with it."""
    return ctx.live if ctx.live is not None and compares_live(ctx.site, role) else None


def _ran_as(receipt: StartReceipt, handle: ServerHandle) -> None:
    """How the head runs, read back once it answers: its CPU set and priority, its container, its Slurm step."""
    receipt.scheduling = handle.scheduling
    receipt.container = handle.described()
    if isinstance(handle, SlurmStep):  # the step Slurm tracks it as, in the window's job
        receipt.slurm_step = handle.where()
