"""A sequential rule's looks while its window runs: what the starts so far decide, and whether to go on.

A look is computed exactly as the decide step will replay it (the same stored rows, the same archive
noise), so the window stops where ``fairwin decide WINDOW`` says it stopped. When a look settles
nothing, the next pair of starts runs only if the budget, measured against the time really spent,
still fits it (gates/budget.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ConfigDict

from fairwin.decision import decide
from fairwin.decision.document import Look, LookVerdict, Stopping
from fairwin.decision.sequential import archive_starts
from fairwin.directory.gate_summary import BudgetEstimate
from fairwin.directory.layout import WindowDir
from fairwin.directory.window_records import WindowRecords
from fairwin.gates.budget import next_pair_refused
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.schedule import StartSpec
from fairwin.records import SparseModel
from fairwin.verdict.stored import Deciding, window_context


def look_now(loaded: LoadedPlan, window: WindowDir, deciding: Deciding) -> Look | None:
    """A sequential window's look over the starts it has finished, computed as the decide step will replay it
    (the same rows and archive noise), or None when this number of starts is not one of its looks."""
    records = WindowRecords.read(window)  # each of the window's files read once for this look
    rows = records.pooled
    ran = len({row.start for row in rows})
    context = window_context(loaded, window, deciding, records)
    if ran not in deciding.rule.looks_taken(archive_starts(deciding.rule, context)):
        return None
    stopping = decide(rows, rule=deciding.rule, context=context).sequential
    assert stopping is not None  # a sequential rule's decision always has its looks
    return stopping.looks[-1]


class LookEnd(SparseModel):
    """The look step's journaled end: what the look found and why the window stops (``stopped``, None: it goes
    on); or, where no look was taken after this start, why not."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    verdict: LookVerdict | None = None
    cells: dict[str, LookVerdict] | None = None
    level: float | None = None
    stopped: str | None = None
    taken: bool | None = None
    why: str | None = None
    arms: dict[str, LookVerdict] | None = None  # a many-arm window: each candidate's state after the look
    dropped: list[str] | None = None  # a many-arm window: the candidates this look settled, not launched again


@dataclass(frozen=True)
class LookResult:
    """What a look found, and why the window runs no more starts (None: it goes on)."""

    look: Look
    stopped: str | None  # "decided", or the budget's words

    def line(self, after: int) -> str:
        """``look after s5: CONTINUE, short-b1 +12.4 % [-3.1, +30.2]``, with the budget's words when it stopped."""
        words = "; ".join(
            f"{cell} {point:+.1f} % [{low:+.1f}, {high:+.1f}]" for cell, (point, low, high) in self.look.primary.items()
        )
        line = f"look after s{after}: {self.look.verdict}" + (f", {words}" if words else "")
        return line + (f"; stopped: {self.stopped}" if self.stopped not in (None, "decided") else "")

    def record(self) -> LookEnd:
        """The look step's journaled end."""
        return LookEnd(verdict=self.look.verdict, cells=self.look.cells, level=self.look.level, stopped=self.stopped)


def go_on_or_stop(
    look: Look,
    after: int,
    starts: Sequence[StartSpec],
    budget: BudgetEstimate,
    elapsed_s: float,
    loaded: LoadedPlan,
) -> LookResult:
    """Stop when the look settled the verdict; else when the next pair would not fit the budget."""
    if look.verdict != "CONTINUE":
        return LookResult(look, "decided")
    return LookResult(look, next_pair_refused(budget, starts[after : after + 2], after, elapsed_s, loaded.plan.budget))


def unspent_line(stopping: Stopping, verdict: str, starts: Sequence[StartSpec], budget: BudgetEstimate) -> str:
    """``decided WIN after 5 of at most 9 starts; 4 starts of hold (about 38 min) not spent``."""
    per_start = budget.per_start_s  # the starts the budget allowed (max_starts may stop short of the rule)
    unspent = [s.name for s in starts[stopping.starts_used :] if s.name in per_start]
    minutes = sum(float(per_start.get(name, 0.0)) for name in unspent) / 60.0
    saved = f"; {len(unspent)} starts of hold (about {minutes:.0f} min) not spent" if unspent else ""
    return stopping.line(verdict) + saved
