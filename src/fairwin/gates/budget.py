"""The window's time budget: an estimate that must fit before anything starts, and the pairs a window may add.

Each start costs a server start, one warm-up stream, every cell's waves and a stop.
Costs come from earlier windows of the same roles and cells when there are any
(*measured*: the median over the windows found, gates/calibration.py) and from the
plan's ``[budget]`` otherwise (*assumed*); the table says which is which. The window
then needs its close (``restore_s``) and a reserve for restarting a pair of servers;
the dry bound uses the reserve's upper bound. A window is refused when, at its first
chance to stop (a fixed rule's last start, a sequential rule's first look), its dry
bound exceeds ``limit_min`` or its measurement end exceeds ``measurement_limit_min``;
a sequential window checks each further pair against the time it really spent.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fairwin.decision.rules import RULES, get_rule
from fairwin.errors import GateRefused
from fairwin.gates.calibration import Calibration, cell_key, role_key
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.models import BudgetSettings, Mode
from fairwin.plan.schedule import StartSpec, diagnosed_starts, starts_for
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
    loaded: LoadedPlan, mode_name: str, mode: Mode, calibration: Calibration | None = None, archive_starts: int = 0
) -> TimeEstimate:
    """``archive_starts``: the fewest archived control starts of a deciding cell (a sequential rule's first look
    comes after 3 starts only with enough of them)."""
    plan, budget = loaded.plan, loaded.plan.budget
    rule = get_rule(plan.window.rule)
    found = calibration or Calibration()
    sources: dict[str, str] = {}
    one_wave, waves_s, waves = _waves(loaded, found, sources)
    shortest = min(plan.cells.values(), key=lambda c: c.prompt_tokens)
    # The warm-up stream, then at most warmup_waves_max uncounted waves of the first decision cell.
    warmup = stream_seconds(loaded, shortest.prompt_tokens, plan.window.warmup_max_tokens)
    warmup += plan.window.warmup_waves_max * one_wave[plan.first_decision_cell]
    schedule = starts_for(mode, count=rule.start_count)
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
        rule.first_look(archive_starts) if rule.looks else 0,
        archive_starts,
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
    for role in dict.fromkeys((mode.control, mode.candidate)):
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
    key = snapshot(loaded)["sha256"]
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


def fits_limits(loaded: LoadedPlan, found: TimeEstimate, starts: int) -> bool:
    """Whether a window that stops after ``starts`` starts ends its measurement, and its deciding bound (the
    measured reserve, else the dry bound), within the limits."""
    budget = loaded.plan.budget
    return (
        found.end_after(starts) <= budget.measurement_limit_min * 60.0
        and found.deciding_bound_after(starts) <= budget.limit_min * 60.0
    )


def _with_starts(found: TimeEstimate, count: int) -> TimeEstimate:
    """The estimate for ``count`` starts of the same two roles taking turns (another rule's shape)."""
    starts = [found.starts[i] if i < len(found.starts) else found.starts[i % 2] for i in range(count)]
    return dataclasses.replace(found, starts=starts, first_look=0)


def _rule_words(loaded: LoadedPlan, found: TimeEstimate) -> str:
    """Which rule's starts the refusal rests on, and which registered rules would fit (at their first look)."""
    starts = found.first_stop
    fitting = []
    for other in RULES.values():
        first = other.first_look(found.archive_starts)
        if fits_limits(loaded, _with_starts(found, first), first):
            fitting.append(f"{other.id} ({first} starts)")
    shape = f"its first look comes after {starts} starts" if found.first_look else f"it runs {starts} starts"
    return (
        f"rule {found.rule_id}: {shape}; registered rules that would fit: {', '.join(fitting) or 'none'} (window.rule)"
    )


def check_budget(loaded: LoadedPlan, found: TimeEstimate) -> None:
    """Refuses a window whose first chance to stop (a sequential rule's first look; a fixed rule's last start)
    cannot fit the limits: its measurement end, and its total on the measured pair reserve where earlier windows
    measured one, else its dry bound. A sequential window's later starts are checked as it runs."""
    budget = loaded.plan.budget
    starts = found.first_stop
    end_min = found.end_after(starts) / 60.0
    if end_min > budget.measurement_limit_min:
        raise GateRefused(
            f"budget: the measurement would end at {end_min:.1f} min, past its {budget.measurement_limit_min:g} min "
            f"limit; {_rule_words(loaded, found)}; or fewer repeats, cells or streams, or a larger limit in [budget]"
        )
    if found.deciding_bound_after(starts) / 60.0 <= budget.limit_min:
        return
    if found.pair_reserve_measured:
        raise GateRefused(
            f"budget: on the measured pair reserve ({found.pair_reserve_s:.0f} s) the window needs "
            f"{found.reserve_after(starts) / 60.0:.1f} min, over the {budget.limit_min:g} min limit; "
            f"{_rule_words(loaded, found)}"
        )
    raise GateRefused(
        f"budget: nothing measured a pair reserve yet, and the dry bound is {found.dry_bound_after(starts) / 60.0:.1f} "
        f"min, over the {budget.limit_min:g} min limit; it fits while the pair reserve is at most "
        f"{found.room_s(starts, budget.limit_min):.0f} s (dry_reserve_s is {found.dry_reserve_s:g} s), which "
        f"earlier windows of this mode's roles measure; {_rule_words(loaded, found)}"
    )


def next_pair_refused(
    estimate: dict[str, Any], pair: Sequence[StartSpec], elapsed_s: float, budget: BudgetSettings
) -> str | None:
    """Why a sequential window may not run its next pair of starts (None: it fits), measured against the time
    actually spent since the window opened: the pair's estimated cost must end the measurement within
    ``measurement_limit_min`` and leave the close and dry reserve within ``limit_min``."""
    if not pair:
        return None
    per_start = estimate.get("per_start_s", {})
    pair_s = sum(float(per_start.get(start.name, 0.0)) for start in pair)
    tail_s = float(estimate.get("close_reserve_s", 0.0))
    names = " and ".join(start.name for start in pair)
    end_min, dry_min = (elapsed_s + pair_s) / 60.0, (elapsed_s + pair_s + tail_s) / 60.0
    if end_min > budget.measurement_limit_min:
        return (
            f"the budget: {names} would end the measurement at {end_min:.1f} min, past its "
            f"{budget.measurement_limit_min:g} min limit"
        )
    if dry_min > budget.limit_min:
        return (
            f"the budget: after {names} the window would need {dry_min:.1f} min with its close and reserve, "
            f"over the {budget.limit_min:g} min limit"
        )
    return None


def render_table(estimates: list[TimeEstimate], loaded: LoadedPlan) -> list[str]:
    """Per mode: the first look's (where the window may first stop) and the maximum's measurement end and bounds.
    The bound the gate holds is the reserve total on a measured pair reserve, else the dry bound."""
    budget = loaded.plan.budget
    lines = [
        f"| mode | stops after | {budget.pair_reserve_s:g} s pair reserve | measurement ends "
        f"| {budget.dry_reserve_s:g} s dry bound |",
        "|---|---|---|---|---|",
    ]
    for found in estimates:
        first, most = found.first_stop, len(found.starts)
        for starts, words in ((first, "first look"), (most, "maximum")) if first != most else ((most, "its starts"),):
            end = found.end_after(starts)
            reserve = f"{found.reserve_after(starts) / 60:.1f} min" + (
                " (measured)" if found.pair_reserve_measured else ""
            )
            lines.append(
                f"| {found.mode} | {starts} starts ({words}) | {reserve} | {end / 60:.1f} min "
                f"| {found.dry_bound_after(starts) / 60:.1f} min{_verdict(loaded, found, starts)} |"
            )
    return lines


def _verdict(loaded: LoadedPlan, found: TimeEstimate, starts: int) -> str:
    """What the dry-bound cell adds: nothing when it fits; else refuses (and what would fit), or over."""
    if fits_limits(loaded, found, starts):
        return ""
    budget = loaded.plan.budget
    if found.end_after(starts) <= budget.measurement_limit_min * 60.0 and not found.pair_reserve_measured:
        room = found.room_s(starts, budget.limit_min)
        return f" (refuses; fits while the measured pair reserve is at most {room:.0f} s)"
    return " (over)"
