"""A window's state: what it was admitted with and what its steps leave behind, declared once.

:class:`~fairwin.window.machine.Window` is made of its open (:class:`~fairwin.window.opening.Opening`)
and its close (:class:`~fairwin.window.closing.Closing`); all three read and write this state, so
each type-checks alone without restating a field.
"""

from __future__ import annotations

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
from fairwin.rows import Order, PooledRow
from fairwin.telemetry.gpu import GpuSource
from fairwin.telemetry.hold_clocks import ClockWatch
from fairwin.telemetry.sampler import Sampler
from fairwin.window.looks import LookResult
from fairwin.window.preflight import Preflight
from fairwin.window.processes import Launcher
from fairwin.window.progress import Listener, ProgressFeed
from fairwin.window.start_context import StartContext


@dataclass
class WindowState:
    """One window's state (see the module's docstring)."""

    loaded: LoadedPlan
    site: Site  # admission's: where the mode's processes and production run
    checked: Preflight
    directory: WindowDir
    order: Order
    starts: list[StartSpec]
    gate_summary: GateSummary
    environment: Environment
    archive_store: ArchiveStore
    archive_snapshot: Snapshot  # read once at open: the power warnings and the decision's noise both come from it
    power_warnings: list[str]
    launcher: Launcher
    say: Callable[[str], None]
    hold: Hold | None = None  # production's hardware, when the plan has a [production]
    live: LiveProduction | None = None  # production as it ran before the take-down, where it was read
    chain: ChainRun | None = None  # its part in a chain (--chain, --chain-last)
    gpu: GpuSource | None = None  # GPU telemetry, sampled through every start
    production_cap: tuple[float | None, str] = (None, "none declared")  # production's clock cap, read at open
    production_caps: dict[str, float | None] = field(default_factory=dict)  # each host's own configured cap
    hardware: HardwareLock | None = None  # every lock on the hardware this window holds until its close
    clocks: ClockWatch = field(default_factory=ClockWatch)  # admission's: unobserved clocks, watchdog marks
    archive_starts: int = 0  # the fewest archived control starts of a deciding cell: a sequential rule's first look
    listener: Listener | None = None  # follows the window's progress events (window/progress.py)
    archived: bool = False
    archive_problem: str | None = None  # why the archive step could not append, with the command that retries
    restore_failure: RestoreFailed | None = None  # the restore step's, kept until close raises it
    rows: list[PooledRow] = field(default_factory=list)
    decision: Decision | None = None
    stopped: str | None = None  # a sequential window: why it runs no more starts ("decided", or the budget's words)
    looked: dict[int, LookResult | None] = field(
        default_factory=dict
    )  # a look taken before its start's servers stopped
    opened_at: float = 0.0  # time.monotonic() at the open step: the budget's clock
    # One context for every start: it carries the prompts the first start prepared.
    context: StartContext = field(init=False)
    feed: ProgressFeed = field(init=False)
    hold_sampler: Sampler | None = field(init=False, default=None)  # the GPUs through the hold, where read
    team_hold: TeamHold | None = field(init=False, default=None)  # the team's own hold ([custody]), where declared

    def __post_init__(self) -> None:
        """The window's own (``Window.__post_init__``) makes what ``init=False`` leaves out."""
