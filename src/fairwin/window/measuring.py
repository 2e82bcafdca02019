"""The window's measuring steps: each start, and a sequential rule's looks between them.

:class:`Measuring` owns what they produce (:class:`Measured`: the pooled rows,
a look taken before its start's servers stopped, why the window stopped); the window's other
steps read it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fairwin.custody.chain import ChainRun
from fairwin.decision import RuleSpec
from fairwin.directory.gate_summary import BudgetEstimate
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.schedule import StartSpec
from fairwin.rows import PooledRow
from fairwin.telemetry.sampler import Sampler
from fairwin.verdict.stored import Deciding
from fairwin.window.looks import LookEnd, LookResult, go_on_or_stop, look_now
from fairwin.window.start import run_start
from fairwin.window.start_context import StartContext


@dataclass
class Measured:
    """What the starts and the looks produce."""

    rows: list[PooledRow] = field(default_factory=list)
    stopped: str | None = None  # a sequential window: why it runs no more starts ("decided", or the budget's words)
    looked: dict[int, LookResult | None] = field(default_factory=dict)  # a look taken before its servers stopped
    opened_at: float = 0.0  # time.monotonic() at the open step: the budget's clock
    hold_sampler: Sampler | None = None  # the GPUs through the hold, where read


class Measuring:
    """The starts, in their drawn order, and the looks the rule takes after them."""

    def __init__(
        self,
        state: Measured,
        context: StartContext,
        starts: list[StartSpec],
        rule: RuleSpec,
        archive_starts: int,
        budget: BudgetEstimate,
        deciding: Callable[[], Deciding],
    ) -> None:
        self.state, self.context, self.starts, self.rule = state, context, starts, rule
        self.looks = tuple(rule.looks_taken(archive_starts)) if rule.looks else ()
        self.budget, self.deciding = budget, deciding

    @property
    def loaded(self) -> LoadedPlan:
        return self.context.loaded

    def last_start(self) -> str:
        """The last start that finished (its rows are in): where a sequential window stopped."""
        return self.state.rows[-1].start if self.state.rows else "no start"

    async def start(self, start: StartSpec) -> None:
        self.state.rows.extend(await run_start(self.context, start))

    async def placeholders_if_last(self, chain: ChainRun, start: StartSpec) -> None:
        """A chained window's placeholders, started while this start's servers still hold the hardware when it is
        the window's last: the last planned, or one whose look ends the window (that look is taken now, before
        the stop, and the look step takes it as it is)."""
        after = next(number for number, planned in enumerate(self.starts, 1) if planned.name == start.name)
        last = after == len(self.starts)
        if not last and after in self.looks:
            result = self.state.looked[after] = self._looked(after)
            last = result is not None and result.stopped is not None
        if last:
            self.context.say(f"  {start.name}: starting the chain's placeholders before its servers stop")
            await chain.start_placeholders()

    def _looked(self, after: int) -> LookResult | None:
        """What the look after ``after`` starts finds, and whether the window stops there; None where the rule
        takes no look then."""
        found = look_now(self.loaded, self.context.window, self.deciding())
        if found is None:
            return None
        elapsed = time.monotonic() - self.state.opened_at
        return go_on_or_stop(found, after, self.starts, self.budget, elapsed, self.loaded)

    async def look(self, after: int) -> LookEnd:
        """A sequential rule's look after ``after`` starts: stop when it settles the verdict, or when the next
        pair of starts would not fit the budget; else go on. Journaled, said, and sent as a progress event."""
        result = self.state.looked.pop(after) if after in self.state.looked else self._looked(after)
        if result is None:
            first = "too few archived control starts for a look after 3"
            return LookEnd(taken=False, why=f"{self.rule.id} takes its first look later ({first})")
        found = result.look
        self.state.stopped = result.stopped
        self.context.say(result.line(after))
        if self.context.feed is not None:
            self.context.feed.emit("look", after=after, verdict=found.verdict, cells=found.cells, stop=result.stopped)
        return result.record()
