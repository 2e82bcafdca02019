"""What a decision is made from: pooled rows, the window's context, and archived noise.

The rows themselves (:class:`~fairwin.rows.DecisionRow`, the documented input
schema) belong to the shared rows (fairwin.rows); this module adds what only decisions read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fairwin.decision.divergence import GreedyFindings
from fairwin.directory.manifest import ArchiveSnapshot
from fairwin.formats import CONTEXT, RecordFormat
from fairwin.profiles import ProfileName
from fairwin.records import Record
from fairwin.rows import DecisionRow, Order

__all__ = ["ArchiveNoise", "ArchiveSnapshot", "DecisionRow", "FailedStart", "WindowContext"]


class ArchiveNoise(BaseModel):
    """The control archive's spread of one metric for one cell (same max_tokens, commit, clock cap).

    ``launch_cv_pct`` is the relative standard deviation of per-start means across
    archived control starts (launch to launch, day to day); ``repeat_cv_pct`` the
    pooled relative standard deviation of repeats within a start.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str
    cell: str
    starts: int
    windows: int
    launch_cv_pct: float | None
    repeat_cv_pct: float | None
    range_pct: float | None
    problems: list[str] = Field(default_factory=list)


def archive_spreads(
    means: np.ndarray, deviations: Sequence[float], dof: int
) -> tuple[float | None, float | None, float | None]:
    """(launch cv %, repeat cv %, range %) of archived control starts, as the archive reports them: the relative
    s.d. of the starts' means (on ``starts - 1`` degrees of freedom: an estimate, never the true spread), the
    pooled relative s.d. of repeats about their start's mean (``deviations``, on ``dof``), and the range of the
    means. The one estimator of the archive (archive/noise.py) and of the audit's simulated archives."""
    level = float(means.mean()) if len(means) else None
    launch_cv = repeat_cv = spread = None
    if level and len(means) >= 2:
        launch_cv = 100.0 * float(means.std(ddof=1)) / level
        spread = 100.0 * float(np.ptp(means)) / level
    if level and dof > 0:
        repeat_cv = 100.0 * float(np.sqrt(np.sum(np.square(deviations)) / dof)) / level
    return launch_cv, repeat_cv, spread


class FailedStart(BaseModel):
    """A many-arm window's candidate whose start failed (its server died, or a runtime check refused it): dropped
    INCONCLUSIVE there, while the window went on with the others."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    candidate: str
    start: str
    round: int
    error: str


class WindowContext(Record):
    """``fairwin.decision-context/1``: everything besides the rows: the cells (and which never decide),
    production's clock cap, the order, the archive's noise."""

    record_format: ClassVar[RecordFormat] = CONTEXT
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["fairwin.decision-context/1"] = "fairwin.decision-context/1"

    window_id: str
    mode: str
    cells: list[str] = Field(min_length=1, description="Every cell, in the plan's order.")
    reported: list[str] = Field(default_factory=list, description="Cells that are measured but never decide.")
    production_clock_cap_mhz: float | None = None
    production_caps_by_host: dict[str, float | None] | None = Field(
        None, description="Production's configured cap on each host the window touched, each read there."
    )
    between_starts_dialbacks: dict[str, int] | None = Field(
        None, description="Dial-backs seen while production was down but no start ran, by gap ('before s2')."
    )
    between_starts_relocks: dict[str, list[str]] | None = Field(
        None, description="Changes of the held clock while production was down but no start ran, by gap."
    )
    watchdog_events: dict[str, list[str]] | None = Field(
        None, description="The lines each host's clock watchdog logged during the window (telemetry.watchdog_logs)."
    )
    order: Order = "control-first"
    candidates: list[str] = Field(
        default_factory=list,
        description="A many-arm window's candidates (their roles), in the plan's order; empty for a two-arm window.",
    )
    failed_starts: list[FailedStart] = Field(
        default_factory=list, description="A many-arm window's candidates whose start failed, each dropped there."
    )
    archive: list[ArchiveNoise] = Field(default_factory=list, description="Per cell and metric, from the archive.")
    archive_snapshot: ArchiveSnapshot | None = Field(None, description="The archive snapshot the noise came from.")
    greedy: GreedyFindings | None = Field(None, description="The greedy diagnostics' findings, when they ran.")
    stop_reason: str | None = Field(
        None, description="Why a sequential window stopped before a look settled it (its budget), when it did."
    )
    unobserved: list[str] = Field(
        default_factory=list,
        description="Checks that could not observe their input: accepted so by the plan, or a CPU-only plan's clocks.",
    )
    accepted_unobserved: list[str] = Field(
        default_factory=list, description="The checks the plan accepts unobserved (runtime.accept_unobserved)."
    )
    host_findings: list[str] = Field(
        default_factory=list, description="What the host was doing around the starts: one that was not idle before."
    )
    counters: ProfileName | None = Field(
        None, description="The server profile the starts pooled with (vllm, llamacpp, none); None: not recorded."
    )

    def noise(self, cell: str, metric: str) -> ArchiveNoise | None:
        return next((a for a in self.archive if a.cell == cell and a.metric == metric), None)
