"""What every start of a window shares: the plan, the directory, the launcher, the prompts cut once.

Its own module so that the steps of a start (warm-up, waves, diagnostics) can take it
without importing the start that calls them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from fairwin.client.prepare import PreparedPrompt
from fairwin.directory.layout import WindowDir
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.schedule import StartSpec, WaveSpec, waves_for
from fairwin.plan.site import Site
from fairwin.production.live import LiveProduction
from fairwin.profiles import ServerProfile
from fairwin.telemetry.gpu import GpuSource
from fairwin.telemetry.sampler import Sampler
from fairwin.window.processes import Launcher
from fairwin.window.progress import ProgressFeed


@dataclass
class StartContext:
    loaded: LoadedPlan
    site: Site
    window: WindowDir
    launcher: Launcher
    say: Callable[[str], None]
    gpu: GpuSource | None = None  # sampled through every start, when the host has GPUs to read
    feed: ProgressFeed | None = None  # progress events for a display (window/progress.py)
    greedy_starts: set[str] = field(default_factory=set)  # the starts that run greedy diagnostics
    live: LiveProduction | None = None  # production as it ran: what roles compared with it are checked against
    hold_sampler: Sampler | None = None  # the window's GPUs through the hold: paused while a start samples its own
    # Run at the end of every start that measured, before its servers let go of the hardware: a chained window's
    # placeholders start there when the start is the window's last (the last planned, or one whose look ends it).
    before_stop: Callable[[StartSpec], Awaitable[object]] | None = None
    # The server profile the window pools with: chosen at its first healthy start, which every later one matches.
    profile: ServerProfile | None = None
    # cell -> "family/prompt id" -> prompt (ids are unique within a family, not across families)
    prepared: dict[str, dict[str, PreparedPrompt]] = field(default_factory=dict)
    # Each cell's waves, the same for every start of the window: computed once, here.
    schedule: dict[str, list[WaveSpec]] = field(init=False)

    def __post_init__(self) -> None:
        self.schedule = {cell: waves_for(self.loaded, cell) for cell in self.loaded.plan.cells}
