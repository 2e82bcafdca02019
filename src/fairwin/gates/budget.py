"""The window's time budget: the estimate (gates/estimate.py) must fit before anything starts, and a sequential
window may add a pair of starts only while the pair fits the time it really spent.

A window is refused when, at its first chance to stop (a fixed rule's last start, a sequential
rule's first look), its dry bound exceeds ``limit_min`` or its measurement end exceeds
``measurement_limit_min``; the refusal says what would fit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from fairwin.directory.gate_summary import BudgetEstimate
from fairwin.gates.estimate import TimeEstimate
from fairwin.gates.refusal import refuse
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.models import BudgetSettings
from fairwin.plan.schedule import StartSpec
from fairwin.rules.registry import RULES


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


def _candidates_words(loaded: LoadedPlan, found: TimeEstimate) -> str:
    """A many-arm window's refusal: its first look after two rounds of every arm, and how many candidates would fit
    (each round one start fewer a candidate fewer; the candidates' starts costed at their mean)."""
    control = [s for s in found.starts if s.role == found.control_role]
    candidates = [s for s in found.starts if s.role != found.control_role] or control
    fitting = 0
    for count in range(found.candidates - 1, 1, -1):
        rounds = [control[0], *candidates[:count]] * 2  # two rounds: the first look
        if fits_limits(loaded, dataclasses.replace(found, starts=rounds, first_look=0), len(rounds)):
            fitting = count
            break
    fits = f"{fitting} candidates would fit" if fitting else "not even 2 candidates would fit"
    return (
        f"rule {found.rule_id}: its first look comes after 2 rounds of the control and {found.candidates} candidates "
        f"({found.first_stop} starts); {fits}"
    )


def _rule_words(loaded: LoadedPlan, found: TimeEstimate) -> str:
    """Which rule's starts the refusal rests on, and which registered rules would fit (at their first look)."""
    if found.candidates > 1:
        return _candidates_words(loaded, found)
    starts = found.first_stop
    most = loaded.plan.budget.max_starts
    fitting = []
    for other in (rule for rule in RULES.values() if rule.kind != "arms"):
        first = other.first_look(found.archive_starts)
        if (most is None or first <= most) and fits_limits(loaded, _with_starts(found, first), first):
            fitting.append(f"{other.id} ({first} starts)")
    shape = f"its first look comes after {starts} starts" if found.first_look else f"it runs {starts} starts"
    return (
        f"rule {found.rule_id}: {shape}; registered rules that would fit: {', '.join(fitting) or 'none'} (window.rule)"
    )


def budget_problems(loaded: LoadedPlan, found: TimeEstimate) -> list[str]:
    """Why a window whose first chance to stop (a sequential rule's first look; a fixed rule's last start) cannot
    fit the limits: its measurement end, and its total on the measured pair reserve where earlier windows measured
    one, else its dry bound ([] when it fits). A sequential window's later starts are checked as it runs."""
    budget = loaded.plan.budget
    starts = found.first_stop
    if budget.max_starts is not None and budget.max_starts < starts:
        return [
            f"max_starts is {budget.max_starts}, but {_rule_words(loaded, found)}; raise max_starts in "
            f"[budget] to at least {starts}"
        ]
    end_min = found.end_after(starts) / 60.0
    if end_min > budget.measurement_limit_min:
        return [
            f"the measurement would end at {end_min:.1f} min, past its {budget.measurement_limit_min:g} min "
            f"limit; {_rule_words(loaded, found)}; or fewer repeats, cells or streams, or a larger limit in [budget]"
        ]
    if found.deciding_bound_after(starts) / 60.0 <= budget.limit_min:
        return []
    if found.pair_reserve_measured:
        return [
            f"on the measured pair reserve ({found.pair_reserve_s:.0f} s) the window needs "
            f"{found.reserve_after(starts) / 60.0:.1f} min, over the {budget.limit_min:g} min limit; "
            f"{_rule_words(loaded, found)}"
        ]
    return [
        f"nothing measured a pair reserve yet, and the dry bound is {found.dry_bound_after(starts) / 60.0:.1f} "
        f"min, over the {budget.limit_min:g} min limit; it fits while the pair reserve is at most "
        f"{found.room_s(starts, budget.limit_min):.0f} s (dry_reserve_s is {found.dry_reserve_s:g} s), which "
        f"earlier windows of this mode's roles measure; {_rule_words(loaded, found)}"
    ]


def check_budget(loaded: LoadedPlan, found: TimeEstimate) -> None:
    """:func:`budget_problems`, refused (exit 4) by the budget check."""
    refuse("budget", budget_problems(loaded, found))


def next_pair_refused(
    estimate: BudgetEstimate, pair: Sequence[StartSpec], ran: int, elapsed_s: float, budget: BudgetSettings
) -> str | None:
    """Why a sequential window that has run ``ran`` starts may not run its next pair (None: it fits): the pair
    must stay within ``max_starts`` and, measured against the time actually spent since the window opened, its
    estimated cost must end the measurement within ``measurement_limit_min`` and leave the close and dry reserve
    within ``limit_min``."""
    if not pair:
        return None
    if budget.max_starts is not None and ran + len(pair) > budget.max_starts:
        return f"the budget: {budget.max_starts} starts at most (max_starts)"
    pair_s = sum(estimate.per_start_s.get(start.name, 0.0) for start in pair)
    tail_s = estimate.close_reserve_s
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
