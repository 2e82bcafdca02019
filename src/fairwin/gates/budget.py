"""The window's estimated duration, from the plan's declared (assumed) costs.

The estimate is deliberately simple and explicit: each start costs a server start,
one warm-up stream, every cell's waves, and a stop. A wave of S streams at
concurrency C runs ceil(S / C) batches, each as long as one stream's prefill plus
max_tokens decode steps. Every input is a number the plan states, so the estimate
can be checked by hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fairwin.plan.loading import LoadedPlan


@dataclass(frozen=True)
class Estimate:
    per_start_s: float
    starts: int
    waves_per_start: int
    streams_per_start: int

    @property
    def total_s(self) -> float:
        return self.per_start_s * self.starts

    @property
    def total_min(self) -> float:
        return self.total_s / 60.0


def stream_seconds(loaded: LoadedPlan, prompt_tokens: int, max_tokens: int) -> float:
    budget = loaded.plan.budget
    return (prompt_tokens * budget.prefill_ms_per_token + max_tokens * budget.decode_ms_per_token) / 1000.0


def estimate(loaded: LoadedPlan, starts: int = 3) -> Estimate:
    plan = loaded.plan
    budget = plan.budget
    per_start = budget.startup_s + budget.stop_s
    shortest = min(plan.cells.values(), key=lambda cell: cell.prompt_tokens)
    per_start += stream_seconds(loaded, shortest.prompt_tokens, plan.window.warmup_max_tokens)
    waves = streams = 0
    for cell in plan.cells.values():
        cell_waves = plan.window.repeats * len(cell.families)
        batches = math.ceil(cell.streams_per_wave / cell.concurrency)
        per_start += cell_waves * batches * stream_seconds(loaded, cell.prompt_tokens, cell.max_tokens)
        waves += cell_waves
        streams += cell_waves * cell.streams_per_wave
    return Estimate(per_start_s=per_start, starts=starts, waves_per_start=waves, streams_per_start=streams)
