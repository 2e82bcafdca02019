"""The window's measuring steps: each start, and a sequential rule's looks between them.

:class:`Measuring` owns what they produce (:class:`Measured`: the pooled rows,
a look taken before its start's servers stopped, why the window stopped); the window's other
steps read it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import ConfigDict

from fairwin.custody.chain import ChainRun
from fairwin.decision import RuleSpec
from fairwin.decision.inputs import FailedStart
from fairwin.directory.gate_summary import BudgetEstimate
from fairwin.errors import LaunchError, MetricsError, RuntimeCheckError, WaveError
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.schedule import StartSpec, round_ends
from fairwin.records import SparseModel
from fairwin.rows import PooledRow
from fairwin.telemetry.sampler import Sampler
from fairwin.verdict.stored import Deciding
from fairwin.window.looks import LookEnd, LookResult, go_on_or_stop, look_now
from fairwin.window.rounds import RoundResult, go_on_or_stop_rounds, round_look
from fairwin.window.start import run_start
from fairwin.window.start_context import StartContext


class StartEnd(SparseModel):
    """A start step's journaled end, where it says more than that it ended: a many-arm window's candidate whose
    start failed, dropped while the window went on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    failed: str | None = None


#: What a look found: a sequential window's, or a many-arm window's between rounds (None: no look was taken).
Looked = LookResult | RoundResult | None


@dataclass
class Measured:
    """What the starts and the looks produce."""

    rows: list[PooledRow] = field(default_factory=list)
    stopped: str | None = None  # a sequential window: why it runs no more starts ("decided", or the budget's words)
    dropped: set[str] = field(default_factory=set)  # a many-arm window: candidates settled, not launched again
    failed: list[FailedStart] = field(default_factory=list)  # a many-arm window: candidates whose start failed
    looked: dict[int, Looked] = field(default_factory=dict)  # a look taken before its servers stopped
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
        if rule.rounds:  # a many-arm window looks after the last planned start of each round the rule looks at
            ends = round_ends(starts)
            self.looks = tuple(ends[r] for r in rule.rounds if r in ends)
        else:
            self.looks = tuple(rule.looks_taken(archive_starts)) if rule.looks else ()
        self.budget, self.deciding = budget, deciding

    @property
    def loaded(self) -> LoadedPlan:
        return self.context.loaded

    def last_start(self) -> str:
        """The last start that finished (its rows are in): where a sequential window stopped."""
        return self.state.rows[-1].start if self.state.rows else "no start"

    def stopped(self) -> bool:
        """Whether the window runs no more starts (a look settled it, or the budget ended it)."""
        return self.state.stopped is not None

    def skipped(self, start: StartSpec) -> bool:
        """Whether a start is not run: the window stopped, or (many-arm) its candidate was settled at a look."""
        return self.state.stopped is not None or (start.role in self.state.dropped and start.kind == "candidate")

    async def start(self, start: StartSpec) -> StartEnd | None:
        """One start. In a many-arm window a candidate whose start fails (its server died, a wave or a runtime check
        failed) is dropped INCONCLUSIVE there, its servers stopped, and the window goes on with the others."""
        if not (self.rule.rounds and start.kind == "candidate" and start.round is not None):
            self.state.rows.extend(await run_start(self.context, start))
            return None
        try:
            self.state.rows.extend(await run_start(self.context, start))
        except (LaunchError, WaveError, MetricsError, RuntimeCheckError) as exc:
            failure = FailedStart(candidate=start.role, start=start.name, round=start.round, error=str(exc))
            self.state.failed.append(failure)
            self.state.dropped.add(start.role)
            self.context.say(f"  {start.name}: candidate {start.role} dropped INCONCLUSIVE, its start failed: {exc}")
            return StartEnd(failed=str(exc))
        return None

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

    def _looked(self, after: int) -> Looked:
        """What the look after ``after`` starts finds, and whether the window stops there; None where the rule
        takes no look then."""
        elapsed = time.monotonic() - self.state.opened_at
        if self.rule.rounds:
            found_round = round_look(self.loaded, self.context.window, self.deciding())
            limits = self.loaded.plan.budget
            return go_on_or_stop_rounds(found_round, after, self.starts, self.budget, elapsed, limits)
        found = look_now(self.loaded, self.context.window, self.deciding())
        if found is None:
            return None
        return go_on_or_stop(found, after, self.starts, self.budget, elapsed, self.loaded)

    async def look(self, after: int) -> LookEnd:
        """A sequential rule's look after ``after`` starts: stop when it settles the verdict, or when the next
        pair of starts would not fit the budget; else go on. Journaled, said, and sent as a progress event."""
        result = self.state.looked.pop(after) if after in self.state.looked else self._looked(after)
        if result is None:
            first = "too few archived control starts for a look after 3"
            return LookEnd(taken=False, why=f"{self.rule.id} takes its first look later ({first})")
        self.state.stopped = result.stopped
        self.context.say(result.line(after))
        if isinstance(result, RoundResult):
            self.state.dropped |= result.dropped
            states = result.look.states if result.look is not None else {}
            if self.context.feed is not None:
                self.context.feed.emit("look", after=after, verdict=result.verdict, arms=states, stop=result.stopped)
            return result.record()
        found = result.look
        if self.context.feed is not None:
            self.context.feed.emit("look", after=after, verdict=found.verdict, cells=found.cells, stop=result.stopped)
        return result.record()
