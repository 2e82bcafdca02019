"""Running a window: :func:`open_window` (its admission, window/admission.py, then the lock and a new directory) and
:func:`run_window` (opened, then run).

The window itself, one method per journaled step, is :class:`fairwin.window.machine.Window`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Unpack

from fairwin.custody.chain import (
    ChainRun,
    chained_order,
)
from fairwin.custody.chain_end import abort_chain
from fairwin.custody.hardware_lock import HardwareLock
from fairwin.custody.hold import Hold, fixed_role_urls
from fairwin.custody.lock import HardwareHeld, coordinator, coordinator_of
from fairwin.decision import RuleSpec
from fairwin.directory.environment import Environment, capture
from fairwin.directory.gate_summary import BudgetEstimate
from fairwin.directory.layout import WindowDir, new_window_id
from fairwin.errors import FairwinError, RestoreFailed
from fairwin.launch.runtime_cli import container_clis
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.schedule import window_starts
from fairwin.plan.site import Site
from fairwin.production.placeholder_steps import HoldSteps
from fairwin.production.placeholders import Placeholders
from fairwin.telemetry.cap import production_caps
from fairwin.telemetry.watched_hosts import window_gpus
from fairwin.window.admission import Admission, RunOptions, WindowOptions, admit
from fairwin.window.machine import Window, WindowResult
from fairwin.window.preflight import draw_order, preflight_power
from fairwin.window.state import Custody, Fixed

__all__ = ["Window", "WindowOptions", "WindowResult", "open_window", "run_window"]


async def open_window(loaded: LoadedPlan, mode_name: str, **options: Unpack[WindowOptions]) -> Window:
    """:func:`admit`, then a new window directory: everything before the first journaled step. A chained window
    refused here aborts its chain (placeholders down, production restored, the marker cleared: decision REJECT)."""
    given = RunOptions.of(options)
    try:
        return await open_admitted(await admit(loaded, mode_name, given))
    except FairwinError as exc:
        if given.chain is not None and not isinstance(exc, HardwareHeld):
            await _abort_before_open(loaded, given, exc)
        raise


async def open_admitted(admitted: Admission) -> Window:
    """A new window directory for an admitted window, under the hardware's lock."""
    options, checked = admitted.options, admitted.checked
    say = options.say
    say(gate_line(checked.rule, admitted.gate_summary.budget))
    environment = capture(admitted.site.base_dir)
    cap = admitted.production_cap  # read by the admission, once the hosts answered
    warnings = preflight_power(admitted.site, checked.rule, admitted.snapshot, admitted.mode_name, cap[0])
    for warning in warnings:
        say(f"warning: {warning}")
    gpu = admitted.clocks.here  # the source admission found
    node_caps = _node_caps(admitted.site, say)
    hold = _hold(admitted, say)  # made before the lock: nothing after it may fail short of the directory
    say(f"GPU telemetry: {gpu.name if gpu is not None else 'none (clock caps and dial-backs unobserved)'}")
    chain = chain_for(admitted, hold, environment)
    found = chain.found if chain is not None else None
    chosen_order = options.order or chained_order(checked.rule, found) or draw_order(checked.rule)
    directory, hardware = _locked_directory(admitted)
    seed = admitted.round_seed
    starts = window_starts(checked.mode, checked.rule, chosen_order, seed or 0)
    return Window(
        admission=admitted,
        directory=directory,
        fixed=Fixed(chosen_order, starts, environment, warnings, node_caps, seed),
        custody=Custody(hold=hold, chain=chain, hardware=hardware),
    )


def _hold(admitted: Admission, say: Callable[[str], None]) -> Hold | None:
    """The hold on production's hardware, when the plan declares production; what it really ran beside it."""
    site = admitted.site
    if site.plan.production is None:
        return None
    production = admitted.production
    assert production is not None  # admission made it for the [production] the plan declares
    gpus = window_gpus(admitted.sources)  # the sources admission found: no host is asked again
    declared = production.snapshot()
    if admitted.live is not None:  # what production really ran, beside what the plan declares
        declared = declared.model_copy(update={"live": admitted.live.as_record()})
    return Hold(
        production,
        fixed_role_urls(site),
        say,
        snapshot=declared,
        gpu=gpus,
        containers=container_clis(site),
        hosts=site.remote,
        gpus_unread=list(admitted.clocks.gpus_unread),
        window_job=admitted.allocation.job_id if admitted.allocation is not None else None,
    )


def _locked_directory(admitted: Admission) -> tuple[WindowDir, HardwareLock]:
    """The hardware's lock (every lock a window takes), then the new directory; the lock let go on failure (what
    could not be let go is said, with the command that releases it)."""
    mode_name, options = admitted.mode_name, admitted.options
    window_id = new_window_id(mode_name)
    hardware = HardwareLock.of(admitted.site, admitted.lock, admitted.archive)
    record = hardware.take(window_id, admitted.out / window_id, coordinator(options.coordinator))
    try:
        directory = WindowDir.create(admitted.out, mode_name, window_id, coordinator=coordinator_of(record))
    except BaseException:
        for problem in hardware.release():
            options.say(f"warning: {problem}; `fairwin recover PLAN` releases it")
        raise
    return directory, hardware


def _node_caps(site: Site, say: Callable[[str], None]) -> dict[str, float | None]:
    """Production's configured cap on every host the window touches, each from its own file; nodes that
    disagree are named now (the decision will be INCONCLUSIVE, naming them again)."""
    found = production_caps(site)
    if len({c for c in found.values() if c is not None}) > 1:
        shown = ", ".join(f"{host} {c:g} MHz" for host, c in found.items() if c is not None)
        say(
            f"warning: production's configured clock cap differs between its hosts ({shown}); every cell of the "
            "window will be INCONCLUSIVE until the nodes agree"
        )
    return found


def gate_line(rule: RuleSpec, budget: BudgetEstimate) -> str:
    """'gates passed; estimated ...': the measurement's end, and a sequential rule's first look beside its maximum."""
    most = f"{budget.measurement_end_s / 60:.1f} min of measurement"
    if not rule.looks or budget.first_look_end_s is None:
        return f"gates passed; estimated {most}"
    return (
        f"gates passed; estimated {budget.first_look_end_s / 60:.1f} min to the first look (after "
        f"{budget.first_look} starts), at most {most} ({len(budget.per_start_s)} starts)"
    )


def chain_for(admitted: Admission, hold: Hold | None, environment: Environment) -> ChainRun | None:
    """This window's part in a chain (admission's chain checks have passed: window/admission_checks.py)."""
    options = admitted.options
    wanted = options.chain
    if wanted is None or hold is None:
        return None
    path, found = admitted.chain_marker
    declared = hold.snapshot
    assert declared is not None  # a window's hold is made with production's declaration (_hold)
    if found is not None:
        hold.taken = True  # the chain left production down: from the window's first step, it is owed back
    held_by = hold.window_job  # on a cluster, the chain's hold job: this window is a step of it (admission)
    state_dir = hold.production.state_dir
    return ChainRun(
        marker_path=path,
        ledger_dir=admitted.out,
        placeholders=Placeholders(admitted.site, state_dir, _hold_steps(admitted, held_by, state_dir)),
        last=wanted == "last",
        found=found,
        snapshot=declared,
        commit=environment.commit,
        coordinator=coordinator(options.coordinator),
        slurm_job=held_by,
    )


def _hold_steps(admitted: Admission, job: str | None, state_dir: Path) -> HoldSteps | None:
    """Where a Slurm job holds the chain, the placeholders are steps of it, started by its batch step, which runs
    on the node this window does."""
    if job is None or admitted.allocation is None:
        return None
    site = admitted.site
    node = os.environ.get("SLURMD_NODENAME") or admitted.allocation.nodes[0]
    return HoldSteps(job, node, admitted.out, state_dir, site.base_dir, site.nodes)


async def run_window(loaded: LoadedPlan, mode_name: str, **options: Unpack[WindowOptions]) -> WindowResult:
    """Run one window: :func:`open_window`, then every step of it."""
    window = await open_window(loaded, mode_name, **options)
    return await window.run()


async def _abort_before_open(loaded: LoadedPlan, options: RunOptions, error: FairwinError) -> None:
    say = options.say
    try:
        why = f"refused before its window opened: {error}"
        aborted = await abort_chain(Site.of(loaded), loaded.output_dir(options.output_dir), say, why)
    except RestoreFailed as exc:
        error.with_context(aftermath=f"chain ABORTED, decision REJECT; {exc}")
        return
    if aborted is not None:
        error.with_context(aftermath=f"chain ABORTED, decision REJECT; production {aborted.restore.state}")
