"""Running a window: :func:`open_window` (preflight, gates, the lock, a new directory) and :func:`run_window`.

The window itself, one method per journaled step, is :class:`fairwin.window.machine.Window`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypedDict, Unpack

from fairwin.gates.sequence import GateInputs, run_gates
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.schedule import starts_for
from fairwin.production.control import Production
from fairwin.window.close import archive_path
from fairwin.window.environment import capture
from fairwin.window.hold import Hold, fixed_role_urls
from fairwin.window.layout import WindowDir, new_window_id
from fairwin.window.lock import acquire, coordinator, lock_path, release
from fairwin.window.machine import Window, WindowResult
from fairwin.window.preflight import draw_order, preflight, preflight_power
from fairwin.window.start import Launcher, local_launcher

__all__ = ["Window", "WindowOptions", "WindowResult", "open_window", "run_window"]


def _quiet(_: str) -> None:
    return None


class WindowOptions(TypedDict, total=False):
    """How :func:`open_window` and :func:`run_window` may be told to run a window; all optional."""

    launcher: Launcher  # starts each role's server (tests inject their own)
    say: Callable[[str], None]  # progress lines
    output_dir: Path | None  # where the window's directory is made (default: the plan's window.output_dir)
    order: str | None  # overrides the rule's draw (tests; chained windows that balance orders)
    gates: GateInputs | None  # the receipts the window must be given
    coordinator: str | None  # who runs it, for the lock (default: FAIRWIN_COORDINATOR, else the user)


def open_window(loaded: LoadedPlan, mode_name: str, **options: Unpack[WindowOptions]) -> Window:
    """Preflight and gates, then a new window directory: everything before the first journaled step."""
    say = options.get("say", _quiet)
    checked = preflight(loaded, mode_name)
    out = loaded.output_dir(options.get("output_dir"))
    gate_summary = run_gates(loaded, mode_name, checked.mode, options.get("gates") or GateInputs(), out)
    say(f"gates passed; estimated {gate_summary['budget']['measurement_end_s'] / 60:.1f} min of measurement")
    environment = capture(loaded.base_dir)
    archive = archive_path(loaded, out)
    warnings = preflight_power(loaded, checked.rule, archive, environment.get("git", {}).get("commit"))
    for warning in warnings:
        say(f"warning: {warning}")
    chosen_order = options.get("order") or draw_order(checked.rule)
    hold = None  # made before the lock is taken: nothing after the lock may fail short of the directory
    if loaded.plan.production is not None:
        production = Production(loaded, out)
        roles = {checked.mode.control, checked.mode.candidate}
        hold = Hold(production, fixed_role_urls(loaded, roles), say, snapshot=production.snapshot())
    lock = lock_path(loaded, out)
    window_id = new_window_id(mode_name)
    acquire(lock, window_id, out / window_id, coordinator(options.get("coordinator")))
    try:
        directory = WindowDir.create(out, mode_name, window_id)
    except BaseException:
        release(lock, window_id)
        raise
    return Window(
        loaded=loaded, checked=checked, directory=directory, order=chosen_order,
        starts=starts_for(checked.mode, chosen_order, checked.rule.start_count), gate_summary=gate_summary,
        environment=environment, archive_file=archive, power_warnings=warnings,
        launcher=options.get("launcher", local_launcher), say=say, hold=hold, lock=lock,
    )  # fmt: skip


async def run_window(loaded: LoadedPlan, mode_name: str, **options: Unpack[WindowOptions]) -> WindowResult:
    """Run one window: :func:`open_window`, then every step of it."""
    return await open_window(loaded, mode_name, **options).run()
