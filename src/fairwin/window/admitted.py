"""A window being admitted: what it was asked to be, and what admission's checks observed of the world.

Each observation is read once, by the check named beside it (window/admission_checks.py), and
kept for the window: the archive's rows the gates counted are the rows its looks and its
decision count, production's cap the checks read is the cap every start is held to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from fairwin.archive import ArchiveStore, Snapshot, open_archive
from fairwin.archive.window_rows import archive_location
from fairwin.custody.chain import Marker, marker_path, read_marker
from fairwin.custody.lock import lock_path
from fairwin.directory.gate_summary import GateSummary
from fairwin.directory.manifest import Allocation
from fairwin.gates.calibration import calibrate
from fairwin.gates.estimate import estimate
from fairwin.gates.sequence import GateReading, budget_estimate, gate_summary
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.site import Site
from fairwin.production.control import Production
from fairwin.production.live import LiveProduction
from fairwin.telemetry.cap import planned_cap
from fairwin.telemetry.gpu import GpuSource
from fairwin.telemetry.hold_clocks import ClockWatch
from fairwin.window.options import RunOptions
from fairwin.window.preflight import Preflight, draw_round_seed, first_look_archive, preflight


@dataclass
class Admission:
    """A window of ``mode_name`` of a plan, being admitted; once :func:`~fairwin.window.admission.admit` returns
    it, admitted."""

    loaded: LoadedPlan
    mode_name: str
    options: RunOptions
    production_cap: tuple[float | None, str] = (None, "none declared")  # production's clock cap: its check's
    sources: dict[str, GpuSource | None] = field(default_factory=dict)  # each host's GPU source: "GPUs readable"
    clocks: ClockWatch = field(default_factory=ClockWatch)  # unobserved clocks, watchdog marks: the clock checks
    live: LiveProduction | None = None  # production as it runs, read by its check
    checkouts: dict[str, dict[str, str]] = field(default_factory=dict)  # each pinned checkout: "pinned code"
    archive_starts_read: int | None = None  # the archive counted again with the cap read on its host
    allocation: Allocation | None = None  # the Slurm job the window runs in ([cluster]): "cluster allocation"

    @cached_property
    def checked(self) -> Preflight:
        """The mode, its rule, its runtime declarations: the first check's."""
        return preflight(self.loaded, self.mode_name)

    @cached_property
    def site(self) -> Site:
        return Site.for_mode(self.loaded, self.mode_name)

    @cached_property
    def out(self) -> Path:
        return self.loaded.output_dir(self.options.output_dir)

    @cached_property
    def lock(self) -> Path:
        return lock_path(self.site, self.out)

    @cached_property
    def archive(self) -> ArchiveStore:
        """The control archive (ArchiveError where it cannot be opened: the control archive check's refusal)."""
        return open_archive(archive_location(self.site, self.out))

    @cached_property
    def snapshot(self) -> Snapshot:
        """Its rows, read once: the budget's first look, the warnings and the noise at decide see the same rows."""
        return self.archive.snapshot()

    @property
    def archive_starts(self) -> int:
        """The fewest archived control starts of a deciding cell: a sequential rule's first look."""
        if self.archive_starts_read is not None:
            return self.archive_starts_read
        return self.first_look(planned_cap(self.site))

    def first_look(self, cap: float | None) -> int:
        checked = self.checked
        return first_look_archive(self.site, checked.rule, self.snapshot, self.mode_name, cap)

    @cached_property
    def gates(self) -> GateReading:
        checked, options = self.checked, self.options
        seed = self.round_seed or 0
        return GateReading(
            self.loaded, self.mode_name, checked.mode, options.gates, self.out, self.archive_starts, seed
        )

    @cached_property
    def round_seed(self) -> int | None:
        """A many-arm window's seed of its rounds' orders, drawn once (or as asked): the budget estimates the starts
        as they will run."""
        if not self.checked.mode.many:
            return None
        return self.options.round_seed if self.options.round_seed is not None else draw_round_seed()

    @cached_property
    def gate_summary(self) -> GateSummary:
        """What window.json keeps of the gates (and of the checkouts, read on their hosts)."""
        summary = gate_summary(self.gates)
        if self.archive_starts != self.gates.archive_starts:  # the cap read on its host moved the first look
            found = estimate(
                self.loaded,
                self.mode_name,
                self.checked.mode,
                calibrate(self.out),
                self.archive_starts,
                self.round_seed or 0,
            )
            summary.budget = budget_estimate(found)
        if self.checkouts:
            summary.checkouts = self.checkouts
        return summary

    @cached_property
    def chain_marker(self) -> tuple[Path, Marker | None]:
        """Where a chain in progress is marked, and its marker (None: no chain), read once: the chain checks and
        the window's part in the chain see the same one."""
        path = marker_path(self.site, self.out)
        return path, read_marker(path)

    @cached_property
    def production(self) -> Production | None:
        return Production(self.site, self.out) if self.site.plan.production is not None else None
