"""What a decision is made from: pooled rows, the window's context, and archived noise.

:class:`DecisionRow` is the documented input schema (``docs/decision.md``): the fields
of a ``fairwin.pooled/1`` row the rules read. Other fields are ignored, so a window's
full ``pooled.jsonl`` and a file written by hand both load.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from fairwin.turns import Kind, Order

POOLED_FORMAT = "fairwin.pooled/1"


def _start_name(value: str) -> str:
    if not re.fullmatch(r"s[1-9][0-9]?", value):
        raise ValueError(f"a start is named s1, s2, ... in the order the starts ran, not {value!r}")
    return value


#: A start's name: s1, s2, ... in the order the starts ran.
Start = Annotated[str, AfterValidator(_start_name)]


class DecisionRow(BaseModel):
    """One start x cell x repeat. Metrics may be null: a rule that needs one is then INCONCLUSIVE."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    format: str = POOLED_FORMAT
    start: Start
    kind: Kind | None = Field(None, description="Omitted: taken from the window's order (control-first: s1 control).")
    role: str = ""
    cell: str
    repeat: int = Field(ge=1)
    pooled_rate_tps: float | None = None
    accepted_per_round: float | None = None
    decode_tps: float | None = None
    ms_per_round: float | None = None
    ttft_s: float | None = None
    clock_cap_mhz: float | None = None
    thermal_events: int | None = None
    client_problem: str | None = Field(None, description="Why the client-timed metrics are null, when they are.")


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


class WindowContext(BaseModel):
    """Everything besides the rows: the cells (and which never decide), production's clock cap, the order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window_id: str
    mode: str
    cells: list[str] = Field(min_length=1, description="Every cell, in the plan's order.")
    reported: list[str] = Field(default_factory=list, description="Cells that are measured but never decide.")
    production_clock_cap_mhz: float | None = None
    order: Order = "control-first"
    archive: list[ArchiveNoise] = Field(default_factory=list, description="Per cell and metric, from the archive.")

    def noise(self, cell: str, metric: str) -> ArchiveNoise | None:
        return next((a for a in self.archive if a.cell == cell and a.metric == metric), None)
