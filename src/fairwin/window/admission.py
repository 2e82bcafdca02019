"""A window's admission: every check that refuses it before production is touched (window/admission_checks.py),
one path for the CLI and the public API, and ``fairwin plan check``'s part of it.

First what needs no host (the plan's declarations, the locks, the control archive, a chain in
progress and every gate), then, still before the take-down, the hosts themselves: each answers
with a known key, pinned code is at its commit, each process's command, working directory and
fixed ports are there on its host, the clocks and GPUs can be observed, and production is read
as it runs.
"""

from __future__ import annotations

from fairwin.errors import ArchiveError
from fairwin.gates.refusal import run_checks, run_plain
from fairwin.plan.loading import LoadedPlan
from fairwin.window.admission_checks import ADMISSION, checks
from fairwin.window.admitted import Admission
from fairwin.window.options import RunOptions, WindowOptions

__all__ = ["ADMISSION", "Admission", "RunOptions", "WindowOptions", "admit", "check_plan"]


async def admit(loaded: LoadedPlan, mode_name: str, options: RunOptions) -> Admission:
    """Every check of :data:`ADMISSION` in order: those that contact no host, then the hosts. The one admission
    of the CLI and the public API; what the checks observed is kept on the admission for the window."""
    admitting = Admission(loaded, mode_name, options)
    run_plain(checks("plan", "window"), admitting)
    await run_checks(checks("hosts"), admitting)
    return admitting


def check_plan(loaded: LoadedPlan, mode_name: str) -> Admission:
    """``fairwin plan check``'s part of the admission for one mode: the plan's own checks (its declarations and the
    gates that need no receipt), with the archive counted where it can be read (else as if empty: the budget is
    then checked as if the first look came later, the safer side)."""
    admitting = Admission(loaded, mode_name, RunOptions())
    try:
        admitting.archive_starts_read = admitting.archive_starts
    except ArchiveError:
        admitting.archive_starts_read = 0
    run_plain(checks("plan"), admitting)
    return admitting
