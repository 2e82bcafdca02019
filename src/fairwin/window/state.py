"""A window's state, grouped by who produces it: each group is written by its own steps and only read by others.

:class:`~fairwin.window.machine.Window` is made of its open (:class:`~fairwin.window.opening.Opening`)
and its close (:class:`~fairwin.window.closing.Closing`). What it holds:

- ``admission``: what the admission's checks observed (window/admitted.py): the plan, the site,
  the rule, the gates, the archive's rows, the clocks and production as it ran. Read only.
- ``fixed``: what was fixed before the first step (:class:`Fixed`): the order and its starts,
  the environment, the power warnings, each host's configured cap. Read only.
- ``custody``: the hardware held (:class:`Custody`): production's hold, the chain, the team's
  hold, the locks; each of those objects keeps its own state (taken, restored, owed).
- ``measured``: what the starts and the looks produce (:class:`Measured`).
- ``outcome``: what the decide, archive and restore steps leave for the close (:class:`Outcome`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from fairwin.archive import ArchiveStore, Snapshot
from fairwin.custody.chain import ChainRun
from fairwin.custody.hardware_lock import HardwareLock
from fairwin.custody.hold import Hold
from fairwin.custody.team_hold import TeamHold
from fairwin.decision import Decision
from fairwin.directory.environment import Environment
from fairwin.directory.gate_summary import GateSummary
from fairwin.directory.layout import WindowDir
from fairwin.errors import RestoreFailed
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.schedule import StartSpec
from fairwin.plan.site import Site
from fairwin.production.live import LiveProduction
from fairwin.rows import Order
from fairwin.telemetry.gpu import GpuSource
from fairwin.telemetry.hold_clocks import ClockWatch
from fairwin.window.admitted import Admission
from fairwin.window.measuring import Measured, Measuring
from fairwin.window.preflight import Preflight
from fairwin.window.processes import Launcher, local_launcher, step_launcher
from fairwin.window.progress import ProgressFeed
from fairwin.window.start_context import StartContext


@dataclass(frozen=True)
class Fixed:
    """What :func:`~fairwin.window.run.open_admitted` fixed before the window's first step."""

    order: Order
    starts: list[StartSpec]
    environment: Environment
    power_warnings: list[str]
    node_caps: dict[str, float | None]  # production's configured cap on each host the window touches
    round_seed: int | None = None  # a many-arm window's seed of its rounds' orders


@dataclass
class Custody:
    """The hardware the window holds, each part with its own state."""

    hold: Hold | None = None  # production's hardware, when the plan has a [production]
    chain: ChainRun | None = None  # its part in a chain (--chain, --chain-last)
    hardware: HardwareLock | None = None  # every lock on the hardware, held until the close
    team_hold: TeamHold | None = None  # the team's own hold ([custody]), where declared


@dataclass
class Outcome:
    """What the decide, archive and restore steps leave for the close."""

    decision: Decision | None = None
    archived: bool = False
    archive_problem: str | None = None  # why the archive step could not append, with the command that retries
    restore_failure: RestoreFailed | None = None  # the restore step's, kept until close raises it


@dataclass
class WindowState:
    """One window's state (see the module's docstring)."""

    admission: Admission
    directory: WindowDir
    fixed: Fixed
    custody: Custody
    measured: Measured = field(default_factory=Measured)
    outcome: Outcome = field(default_factory=Outcome)
    # Made by the window itself (``Window.__post_init__``): one context for every start (it carries the prompts
    # the first start prepared), and the progress events.
    context: StartContext = field(init=False)
    feed: ProgressFeed = field(init=False)
    measuring: Measuring = field(init=False)  # the starts and looks, which write ``measured``

    # Read from the admission, which observed them.
    @property
    def loaded(self) -> LoadedPlan:
        return self.admission.loaded

    @property
    def site(self) -> Site:
        return self.admission.site

    @property
    def checked(self) -> Preflight:
        return self.admission.checked

    @property
    def gate_summary(self) -> GateSummary:
        return self.admission.gate_summary

    @property
    def archive_store(self) -> ArchiveStore:
        return self.admission.archive

    @property
    def archive_snapshot(self) -> Snapshot:
        return self.admission.snapshot

    @property
    def archive_starts(self) -> int:
        return self.admission.archive_starts

    @property
    def live(self) -> LiveProduction | None:
        return self.admission.live

    @property
    def production_cap(self) -> tuple[float | None, str]:
        return self.admission.production_cap

    @property
    def clocks(self) -> ClockWatch:
        return self.admission.clocks

    @property
    def gpu(self) -> GpuSource | None:
        """The GPU source here, found by admission: sampled through every start."""
        return self.admission.clocks.here

    @property
    def say(self) -> Callable[[str], None]:
        return self.admission.options.say

    @property
    def launcher(self) -> Launcher:
        """What starts each server: inside a Slurm job, the default one runs each as a step of the job (srun) on the
        node the window runs on; a launcher a test injects as it is."""
        chosen, allocation = self.admission.options.launcher, self.admission.allocation
        if allocation is None or chosen is not local_launcher:
            return chosen
        return step_launcher(allocation.job_id, os.environ.get("SLURMD_NODENAME") or allocation.nodes[0])

    def __post_init__(self) -> None:
        """The window's own (``Window.__post_init__``) makes what ``init=False`` leaves out."""
