"""The time a window will take, before anything starts: each start's costs, the close and the reserve.

Each start costs a server start, one warm-up stream, every cell's waves and a stop.
Costs come from earlier windows of the same roles and cells when there are any
(*measured*: the median over the windows found, gates/calibration.py) and from the
plan's ``[budget]`` otherwise (*assumed*); the table says which is which. The window
then needs its close (``restore_s``) and a reserve for restarting a pair of servers;
the dry bound uses the reserve's upper bound. gates/budget.py holds the estimate to the
plan's limits.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from fairwin.gates.calibration import Calibration, cell_key, role_key
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.modes import Mode
from fairwin.plan.schedule import diagnosed_starts, round_ends, window_starts
from fairwin.plan.site import Site
from fairwin.production.control import snapshot


@dataclass(frozen=True)
class StartCost:
    start: str
    role: str
    startup_s: float
    warmup_s: float
    waves_s: float
    stop_s: float
    diagnostics_s: float = 0.0  # the greedy diagnostics, on the starts that run them

    @property
    def total_s(self) -> float:
        return self.startup_s + self.warmup_s + self.waves_s + self.stop_s + self.diagnostics_s


@dataclass(frozen=True)
class TimeEstimate:
    mode: str
    starts: list[StartCost]
    restore_s: float
    pair_reserve_s: float
    dry_reserve_s: float
    sources: dict[str, str]
    waves_per_start: int
    takedown_s: float = 0.0  # taking production down, before the first start
    rule_id: str = ""
    pair_reserve_measured: bool = False  # pair_reserve_s is the median restart of this mode's pair, measured
    first_look: int = 0  # a sequential rule's first look (starts); 0: the rule's starts are fixed
    archive_starts: int = 0  # the fewest archived control starts of a deciding cell, which the first look rests on
    candidates: int = 1  # a many-arm window's candidates
    control_role: str = ""

    @property
    def first_stop(self) -> int:
        """Where the window may first stop: a sequential rule's first look, or a fixed rule's last start."""
        return self.first_look or len(self.starts)

    def room_s(self, starts: int, limit_min: float) -> float:
        """The pair reserve that would still fit ``limit_min`` after ``starts`` starts and the restore."""
        return max(limit_min * 60.0 - self.end_after(starts) - self.restore_s, 0.0)

    def end_after(self, starts: int) -> float:
        """When the measurement ends if the window stops after ``starts`` starts, from its open."""
        return self.takedown_s + sum(s.total_s for s in self.starts[:starts])

    @property
    def measurement_end_s(self) -> float:
        """At the rule's maximum: every start the window may run."""
        return self.end_after(len(self.starts))

    def dry_bound_after(self, starts: int) -> float:
        return self.end_after(starts) + self.restore_s + self.dry_reserve_s

    def reserve_after(self, starts: int) -> float:
        return self.end_after(starts) + self.restore_s + self.pair_reserve_s

    def deciding_bound_after(self, starts: int) -> float:
        """What the gate holds against ``limit_min``: the reserve total on a measured pair reserve, else the dry
        bound (the reserve's upper bound)."""
        return self.reserve_after(starts) if self.pair_reserve_measured else self.dry_bound_after(starts)

    @property
    def close_reserve_s(self) -> float:
        """What must still fit after the measurement: the restore and the deciding reserve."""
        return self.restore_s + (self.pair_reserve_s if self.pair_reserve_measured else self.dry_reserve_s)

    @property
    def reserve_total_s(self) -> float:
        return self.measurement_end_s + self.restore_s + self.pair_reserve_s

    @property
    def dry_bound_s(self) -> float:
        return self.measurement_end_s + self.restore_s + self.dry_reserve_s


def stream_seconds(loaded: LoadedPlan, prompt_tokens: int, max_tokens: int) -> float:
    budget = loaded.plan.budget
    return (prompt_tokens * budget.prefill_ms_per_token + max_tokens * budget.decode_ms_per_token) / 1000.0


def _median(values: list[float] | None) -> float | None:
    return statistics.median(values) if values else None


def estimate(
    loaded: LoadedPlan,
    mode_name: str,
    mode: Mode,
    calibration: Calibration | None = None,
    archive_starts: int = 0,
    round_seed: int = 0,
) -> TimeEstimate:
    """``archive_starts``: the fewest archived control starts of a deciding cell (a sequential rule's first look
    comes after 3 starts only with enough of them); ``round_seed``: a many-arm window's, so that each start's
    estimate is named as the window will run it (a round costs the same in any order)."""
    plan, budget = loaded.plan, loaded.plan.budget
    rule = plan.rule_for(mode_name, mode)
    found = calibration or Calibration()
    sources: dict[str, str] = {}
    one_wave, waves_s, waves = _waves(loaded, found, sources)
    shortest = min(plan.cells.values(), key=lambda c: c.prompt_tokens)
    # The warm-up stream, then at most warmup_waves_max uncounted waves of the first decision cell.
    warmup = stream_seconds(loaded, shortest.prompt_tokens, plan.window.warmup_max_tokens)
    warmup += plan.window.warmup_waves_max * one_wave[plan.first_decision_cell]
    schedule = window_starts(mode, rule, seed=round_seed)[: budget.max_starts]  # the budget may stop it sooner
    if rule.rounds:  # a many-arm window first looks after its rule's first round to look at
        first_look = round_ends(schedule).get(rule.rounds[0], len(schedule))
    else:
        first_look = rule.first_look(archive_starts) if rule.looks else 0
    diagnosed = diagnosed_starts(plan.diagnostics.greedy, mode_name, schedule)
    greedy_s = _greedy_seconds(loaded, sources)
    starts = []
    for start in schedule:
        startup, stop = _role_costs(loaded, found, start.role, sources)
        starts.append(
            StartCost(
                start.name, start.role, startup, warmup, waves_s, stop, greedy_s if start.name in diagnosed else 0.0
            )
        )
    if found.unreadable:
        sources["earlier windows left out"] = (
            f"{len(found.unreadable)} could not be read (first: {found.unreadable[0]})"
        )
    takedown_s, restore_s = _production_estimate(loaded, found, sources)
    pair = _measured_pair(loaded, found, mode, sources)
    return TimeEstimate(
        mode_name,
        starts,
        restore_s,
        pair if pair is not None else budget.pair_reserve_s,
        budget.dry_reserve_s,
        sources,
        waves,
        takedown_s,
        rule.id,
        pair is not None,
        first_look,
        archive_starts,
        len(mode.arms),
        mode.control,
    )


def _waves(loaded: LoadedPlan, found: Calibration, sources: dict[str, str]) -> tuple[dict[str, float], float, int]:
    """Each cell's wave, every counted wave of a start together, and their number: measured, else assumed."""
    plan = loaded.plan
    one_wave: dict[str, float] = {}
    waves_s, waves = 0.0, 0
    for name, cell in plan.cells.items():
        count = plan.window.repeats * len(cell.families)
        waves += count
        measured = _median(found.wave_s.get(cell_key(cell)))
        if measured is not None:
            one_wave[name] = measured
            sources[f"cell {name}"] = (
                f"measured: median wave {measured:.1f} s over {len(found.wave_s[cell_key(cell)])} waves"
            )
        else:
            batches = math.ceil(cell.streams_per_wave / cell.concurrency)
            one_wave[name] = batches * stream_seconds(loaded, cell.prompt_tokens, cell.max_tokens)
            sources[f"cell {name}"] = "assumed: [budget] ms per token"
        waves_s += count * one_wave[name]
    return one_wave, waves_s, waves


def _role_costs(loaded: LoadedPlan, found: Calibration, role: str, sources: dict[str, str]) -> tuple[float, float]:
    """A role's start-up and stop: measured over earlier windows, else its own [budget] role_startup_s, else
    startup_s."""
    budget = loaded.plan.budget
    key = role_key(loaded.plan.roles[role])
    startup, stop = _median(found.startup_s.get(key)), _median(found.stop_s.get(key))
    assumed = budget.role_startup_s.get(role, budget.startup_s)
    where = "role_startup_s" if role in budget.role_startup_s else "startup_s"
    sources[f"role {role} start"] = (
        f"measured: median {startup:.1f} s over {len(found.startup_s[key])} starts"
        if startup is not None
        else f"assumed: {assumed:g} s ([budget] {where})"
    )
    return (startup if startup is not None else assumed, stop if stop is not None else budget.stop_s)


def _greedy_seconds(loaded: LoadedPlan, sources: dict[str, str]) -> float:
    """The greedy diagnostics of one diagnosed start: each chosen cell's prompts, one stream at a time."""
    settings = loaded.plan.diagnostics.greedy
    if settings is None:
        return 0.0
    cells = settings.cells or [name for name, cell in loaded.plan.cells.items() if cell.decision]
    seconds = sum(
        settings.prompts * stream_seconds(loaded, loaded.plan.cells[name].prompt_tokens, settings.max_tokens)
        for name in cells
    )
    sources["greedy diagnostics"] = (
        f"assumed: {seconds:.1f} s a diagnosed start ({settings.prompts} prompts x {len(cells)} cells x "
        f"{settings.max_tokens} tokens, [budget] ms per token)"
    )
    return seconds


def _measured_pair(loaded: LoadedPlan, found: Calibration, mode: Mode, sources: dict[str, str]) -> float | None:
    """The time to restart this mode's pair of servers (each role's median stop and start-up), when earlier windows
    measured both roles; None otherwise (then the gate holds the dry bound)."""
    total = 0.0
    for role in mode.roles:
        key = role_key(loaded.plan.roles[role])
        startup, stop = _median(found.startup_s.get(key)), _median(found.stop_s.get(key))
        if startup is None or stop is None:
            sources["pair reserve"] = f"assumed: [budget] pair_reserve_s {loaded.plan.budget.pair_reserve_s:g} s"
            return None
        total += startup + stop
    if mode.control == mode.candidate:
        total *= 2  # a pair of one role: it restarts twice
    sources["pair reserve"] = f"measured: {total:.1f} s to stop and start the pair again (medians)"
    return total


def _production_estimate(loaded: LoadedPlan, found: Calibration, sources: dict[str, str]) -> tuple[float, float]:
    """Seconds to take production down, and to restore and watch it: measured for this declaration, else
    assumed (a server's stop_s; restore_s plus the watch, which always runs its length)."""
    budget, production = loaded.plan.budget, loaded.plan.production
    if production is None:
        return 0.0, budget.restore_s
    key = snapshot(Site.of(loaded)).sha256
    takedown, restore = _median(found.takedown_s.get(key)), _median(found.restore_s.get(key))
    count = len(found.takedown_s.get(key, []))
    sources["production down"] = (
        f"measured: median {takedown:.1f} s over {count} windows"
        if takedown is not None
        else f"assumed: [budget] stop_s {budget.stop_s:g} s"
    )
    sources["restore and watch"] = (
        f"measured: median {restore:.1f} s over {count} windows"
        if restore is not None
        else f"assumed: [budget] restore_s {budget.restore_s:g} s + watch_s {production.watch_s:g} s"
    )
    return (
        takedown if takedown is not None else budget.stop_s,
        restore if restore is not None else budget.restore_s + production.watch_s,
    )
