"""A window's admission: everything that refuses it before production is touched, one path for the CLI and the API.

First what needs no host (the preflight, the lock, the control archive and every gate), then, still
before the take-down, the hosts themselves: each answers with a known key, pinned code is at its
commit, each process's command, working directory and fixed ports are there on its host, and
production is read as it runs.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, TypedDict

from fairwin.archive import ArchiveStore, Snapshot, open_archive
from fairwin.archive.window_rows import archive_location
from fairwin.custody.lock import (
    HardwareLocks,
    MachineLocks,
    lock_path,
    refuse_if_held,
    refuse_if_held_elsewhere,
)
from fairwin.directory.gate_summary import GateSummary
from fairwin.errors import ArchiveError, GateRefused, LaunchError, RuntimeCheckError
from fairwin.gates.calibration import calibrate
from fairwin.gates.estimate import estimate
from fairwin.gates.sequence import GateInputs, budget_estimate, run_gates
from fairwin.launch.checkouts import check_checkouts, pinned_checkouts
from fairwin.launch.listeners import held_here
from fairwin.launch.shell import shell
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.models import Plan
from fairwin.plan.site import Site
from fairwin.production.control import Production
from fairwin.production.live import LiveProduction
from fairwin.production.live_check import production_as_it_runs
from fairwin.production.proof import host_port
from fairwin.rows import Order
from fairwin.telemetry import watchdog
from fairwin.telemetry.cap import planned_cap, production_cap
from fairwin.telemetry.gpu import GpuSource
from fairwin.telemetry.hold_clocks import ClockWatch
from fairwin.telemetry.watched_hosts import (
    declares_clocks,
    find_source,
    host_sources,
    unread_gpus,
    unwatched_clocks,
)
from fairwin.window.preflight import Preflight, first_look_archive, preflight
from fairwin.window.processes import Launcher, launchable, local_launcher
from fairwin.window.progress import Listener


def quiet(_: str) -> None:
    return None


class WindowOptions(TypedDict, total=False):
    """How :func:`open_window` and :func:`run_window` may be told to run a window; all optional."""

    launcher: Launcher  # starts each role's server (tests inject their own)
    say: Callable[[str], None]  # progress lines
    progress: Listener | None  # progress events, fairwin.progress/1 (window/progress.py)
    output_dir: Path | None  # where the window's directory is made (default: the plan's window.output_dir)
    order: Order | None  # overrides the rule's draw (tests; chained windows that balance orders)
    gates: GateInputs | None  # the receipts the window must be given
    coordinator: str | None  # who runs it, for the lock (default: FAIRWIN_COORDINATOR, else the user)
    chain: Literal["chain", "last"] | None  # --chain (leave production down) or --chain-last (end the chain)
    chain_production: Path | None  # --chain-production: a new capture of production, when its declaration changed


@dataclass(frozen=True)
class RunOptions:
    """:class:`WindowOptions` as given, each with its default: made once where a window is asked for, then read
    as attributes (the defaults are said here, not at each read)."""

    launcher: Launcher = local_launcher
    say: Callable[[str], None] = quiet
    progress: Listener | None = None
    output_dir: Path | None = None
    order: Order | None = None
    gates: GateInputs = field(default_factory=GateInputs)
    coordinator: str | None = None
    chain: Literal["chain", "last"] | None = None
    chain_production: Path | None = None

    @classmethod
    def of(cls, options: WindowOptions) -> RunOptions:
        given = {key: value for key, value in options.items() if value is not None}
        return cls(**given)  # type: ignore[arg-type]  # WindowOptions' keys are this class's fields


@dataclass(frozen=True)
class Admission:
    """A window past its preflight and gates, before any host is contacted or anything is made."""

    site: Site  # where its mode's processes and production run, every host resolved
    checked: Preflight
    out: Path
    lock: Path
    archive: ArchiveStore
    snapshot: Snapshot  # read once: the budget's first look, the warnings and the noise at decide see the same rows
    archive_starts: int
    gate_summary: GateSummary
    live: LiveProduction | None = None  # production as it runs, read after the gates and the hosts
    production_cap: tuple[float | None, str] = (None, "none declared")  # production's clock cap, and from where
    clocks: ClockWatch = field(default_factory=ClockWatch)  # unobserved clocks; the watchdog logs' marks


def gated(loaded: LoadedPlan, mode_name: str, options: RunOptions) -> Admission:
    """Preflight, the lock's state and every gate: what refuses a window before it touches any host."""
    checked = preflight(loaded, mode_name)
    site = Site.for_mode(loaded, mode_name)
    out = loaded.output_dir(options.output_dir)
    lock = lock_path(site, out)
    refuse_if_held(lock)  # before anything else: a window that runs now is never disturbed, chained or not
    try:
        archive = open_archive(archive_location(site, out))
        snapshot = archive.snapshot()
    except ArchiveError as exc:  # no fairwin schema, a newer one, or unreachable: refused with the gates
        raise GateRefused(f"the control archive: {exc}") from None
    # Another window on this machine's hardware (any output directory, any plan), or a second coordinator sharing
    # the archive: refused now, naming it (no host is contacted).
    here: list[HardwareLocks] = [MachineLocks.here()]
    refuse_if_held_elsewhere([*here, archive] if isinstance(archive, HardwareLocks) else here, site.lock_keys)
    if options.chain == "chain":
        refuse_missing_placeholders(site)  # found missing at the chained close, production would be left bare
    archive_starts = first_look_archive(site, checked.rule, snapshot, mode_name, planned_cap(site))
    gate_summary = run_gates(loaded, mode_name, checked.mode, options.gates, out, archive_starts)
    return Admission(site, checked, out, lock, archive, snapshot, archive_starts, gate_summary)


async def admit(loaded: LoadedPlan, mode_name: str, options: RunOptions) -> Admission:
    """Everything that refuses a window before production is touched: the preflight, the lock and the gates (before
    any host is contacted), then every host answering, pinned code, each process's command, working directory and
    fixed ports on its host, and production as it runs. The one admission of the CLI and the public API."""
    admitted = gated(loaded, mode_name, options)
    site = admitted.site
    await _hosts_reachable(site)
    checked_out = await _checkouts_pinned(site)
    if checked_out:
        admitted.gate_summary.checkouts = checked_out  # into window.json, with the gates
    production = Production(site, admitted.out) if site.plan.production is not None else None
    held = (site.production_host, host_port(production.base_url)[1]) if production is not None else None
    await launchable(site, held)
    if options.chain == "chain":
        await refuse_missing_placeholders_there(site)
    admitted = await asyncio.to_thread(_with_production_cap, loaded, admitted)
    here = find_source(site.plan.telemetry.gpu)
    sources = await asyncio.to_thread(host_sources, site, here)
    unwatched = tuple(_clocks_watched(site.plan, sources))
    clocks = ClockWatch(unwatched, await watchdog.mark(site), here, tuple(_gpus_readable(site.plan, sources)))
    admitted = replace(admitted, clocks=clocks)
    if production is not None:
        live = await production_as_it_runs(site, production, options.say)
        admitted = replace(admitted, live=live)
    return admitted


def _with_production_cap(loaded: LoadedPlan, admitted: Admission) -> Admission:
    """Production's cap read where it is kept (on its host, once the hosts answered), and the archive counted
    again with it where the gates could only assume it: the first look the gate line promises is the one the
    window's looks will take, on the same rows."""
    cap = production_cap(admitted.site)
    checked = admitted.checked
    starts = first_look_archive(admitted.site, checked.rule, admitted.snapshot, checked.mode_name, cap[0])
    if starts == admitted.archive_starts:
        return replace(admitted, production_cap=cap)
    found = estimate(loaded, checked.mode_name, checked.mode, calibrate(admitted.out), starts)
    admitted.gate_summary.budget = budget_estimate(found)
    return replace(admitted, production_cap=cap, archive_starts=starts)


def _gpus_readable(plan: Plan, sources: dict[str, GpuSource | None]) -> list[str]:
    """The hosts whose GPUs the quiet proof cannot read: refused for a GPU plan unless it accepts them unread (the
    runbook's "both hosts proved quiet" would pass with nothing looked at); a CPU-only plan goes on."""
    unread = unread_gpus(sources)
    if unread and declares_clocks(plan) and "gpus" not in plan.runtime.accept_unobserved:
        raise GateRefused(
            f"the quiet proof cannot read the GPUs of {', '.join(f'host {h}' for h in unread)} (no GPU source "
            "there), and the plan declares production's clock cap: a job computing on them would pass unseen; give "
            'each host nvidia-smi, or add "gpus" to runtime.accept_unobserved to prove them quiet without it'
        )
    return unread


def _clocks_watched(plan: Plan, sources: dict[str, GpuSource | None]) -> list[str]:
    """The hosts whose clocks nothing observes: refused for a plan that declares production's cap (a GPU plan)
    unless it accepts them unobserved; a CPU-only plan goes on, and its decision names them."""
    unseen = unwatched_clocks(plan, sources)
    if unseen and declares_clocks(plan) and "clocks" not in plan.runtime.accept_unobserved:
        raise GateRefused(
            f"the clocks cannot be observed ({'; '.join(unseen)}), and the plan declares production's clock cap: "
            "a window off that cap or dialled back would pass unseen; give each host a GPU source (nvidia-smi), or "
            "set telemetry.cap_from = 'log' with telemetry.watchdog_logs, or add \"clocks\" to "
            "runtime.accept_unobserved to decide without them"
        )
    return unseen


def refuse_missing_placeholders(site: Site) -> None:
    """Every placeholder's command exists here and its port is free (the chained close starts them, after the
    measurement): else refused with the gates, naming it."""
    chain = site.plan.chain
    for name, placeholder in chain.placeholders.items() if chain is not None else ():
        if placeholder.host is not None:
            continue  # checked on its host once the hosts answered: refuse_missing_placeholders_there
        command = placeholder.argv[0]
        found = shutil.which(command, path=None) if "/" not in command else site.resolve(Path(command))
        if found is None or not os.access(found, os.X_OK):
            raise GateRefused(
                f"placeholder {name}: {command} is not a command fairwin can run here; fix "
                "[chain.placeholders] before a chained window leaves production down for it"
            )
        if placeholder.port is not None and (holder := held_here(placeholder.port)) is not None:
            raise GateRefused(
                f"placeholder {name}: its port {placeholder.port} here is already held by {holder}; stop it, or give "
                "the placeholder another port, before a chained window leaves production down for it"
            )


async def refuse_missing_placeholders_there(site: Site) -> None:
    """Every placeholder on a host finds tmux and its command there: else refused, naming what is missing."""
    for name, placeholder in site.plan.chain.placeholders.items():
        if placeholder.host is None:
            continue
        command = shlex.quote(placeholder.argv[0])
        script = f"command -v tmux >/dev/null || echo tmux; command -v -- {command} >/dev/null || echo {command}"
        try:
            _, out = await shell(placeholder.host, site.host(placeholder.host), script)
        except LaunchError as exc:
            raise GateRefused(f"placeholder {name}: {exc}") from None
        if missing := out.split():
            raise GateRefused(
                f"placeholder {name}: {' and '.join(missing)} not found on host {placeholder.host}; install it or fix "
                "[chain.placeholders] before a chained window leaves production down for it"
            )


async def _hosts_reachable(site: Site) -> None:
    """Every host the window touches (production's, its roles' and their workers') answers with a known key,
    after the gates and before anything is touched."""
    if site.remote:
        from fairwin.launch.ssh import reachable  # asyncssh only where hosts are used

        await reachable(site.remote)


async def _checkouts_pinned(site: Site) -> dict[str, dict[str, str]]:
    """Every pinned checkout of the mode's roles and workers, at its commit and clean on its own host, before
    any process is launched (each start checks its own again): else refused, nothing made."""
    pinned = pinned_checkouts(site)
    try:
        return await check_checkouts(pinned)
    except RuntimeCheckError as exc:
        raise GateRefused(f"pinned code: {exc}") from None
