"""The many-arm rule's rounds: every candidate still in play judged after each round, the settled ones dropped.

A round launches the control and every candidate still in play once. After each round the rule
registers a look at, every open candidate is judged in every deciding cell by the many-arm fit
(decision/arms.py) over every start so far, at that look's nominal levels:

- WIN: the point beyond +bar and the WIN interval above 0. Its level is the family's: the rule's
  one-sided alpha split evenly over the window's candidates (Bonferroni: the candidates share the
  control, so their tests are positively correlated and the split is conservative) and spent over
  the looks (Lan-DeMets, tools/sequential_boundaries.py --rounds), so the chance that any
  unchanged candidate is ever called WIN stays within the alpha.
- LOSS: the point beyond -bar and the LOSS interval (the candidate's own alpha, spent the same way)
  below 0, or a guard's interval (its level split over the looks) wholly below -tolerance.
- NO-CHANGE: the equivalence interval within +-bar.
- it cannot WIN (futile): the equivalence interval's upper end below +bar, or a cell settled
  otherwise than WIN (a WIN needs every deciding cell).
- INCONCLUSIVE: a clock condition in its starts, or a metric it needs missing.

A settled candidate keeps its verdict and is not launched again; the window stops when every
candidate is settled, or at the last round; one still open then is NEUTRAL (the document says so). A window that ended
between looks is judged at a last look over the starts it ran, at the next look's levels. Pure:
tables in, rounds out; decision/arms_decision.py makes the document.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from fairwin.decision.arms import ArmsFit, ArmsTable, fit_metric
from fairwin.decision.inputs import WindowContext
from fairwin.decision.validity import check_validity
from fairwin.rules.spec import RuleSpec

#: A candidate's state in one cell at one look: a verdict it keeps, or still open.
CellState = Literal["WIN", "LOSS", "NO-CHANGE", "INCONCLUSIVE", "FUTILE", "OPEN"]
#: A candidate's state over its deciding cells; NEUTRAL: it cannot WIN (dropped), or open at the last round.
ArmState = Literal["WIN", "LOSS", "NO-CHANGE", "INCONCLUSIVE", "NEUTRAL", "OPEN"]


@dataclass(frozen=True)
class Levels:
    """One look's two-sided levels: the WIN interval, the LOSS interval, the equivalence and the guards'."""

    win: float
    loss: float
    equivalence: float
    guard: float


def levels_at(rule: RuleSpec, candidates: int, index: int) -> Levels:
    """The levels of the rule's look number ``index`` for a window of ``candidates`` candidates."""
    assert rule.rounds and rule.win_levels and rule.look_levels and rule.equivalence_levels  # kind arms has them
    guard_alpha = (1.0 - (rule.guard_confidence or rule.confidence)) / len(rule.rounds)  # Bonferroni over looks
    return Levels(
        win=1.0 - 2.0 * rule.win_levels[candidates][index],
        loss=1.0 - 2.0 * rule.look_levels[index],
        equivalence=1.0 - 2.0 * rule.equivalence_levels[index],
        guard=1.0 - guard_alpha,
    )


@dataclass(frozen=True)
class Judged:
    """One candidate in one cell at one look: its state, the primary at the WIN level, and why."""

    state: CellState
    primary: tuple[float, float, float] | None  # point, low, high in %, positive better
    reasons: tuple[str, ...]
    guards_failed: tuple[str, ...] = ()


@dataclass
class Fits:
    """One cell's fits at one look, by metric (a ValueError's words where the fit could not be made)."""

    table: ArmsTable
    by_metric: dict[str, ArmsFit | str]


def fits_at(table: ArmsTable, rule: RuleSpec, context: WindowContext) -> Fits:
    """The primary's fit and each guard's, over the table's starts."""
    return Fits(table, {metric: fit_metric(table, metric, rule, context) for metric in (rule.primary, *rule.guards)})


def signed(found: tuple[float, float, float], higher: bool) -> tuple[float, float, float]:
    point, low, high = found
    return (point, low, high) if higher else (-point, -high, -low)


def judge(fits: Fits, candidate: str, rule: RuleSpec, levels: Levels, context: WindowContext) -> Judged:
    """One candidate in one cell at one look."""
    validity = check_validity(fits.table.pair(candidate), context)
    if not validity.valid:
        return Judged("INCONCLUSIVE", None, tuple(validity.conditions))
    primary = fits.by_metric[rule.primary]
    if isinstance(primary, str):
        return Judged("INCONCLUSIVE", None, (primary,))
    failed = []
    tolerance = rule.guard_tolerance_pct or 0.0
    for guard in rule.guards:
        fit = fits.by_metric[guard]
        if isinstance(fit, ArmsFit) and candidate in fit.candidates:
            point, low, high = signed(fit.interval(candidate, levels.guard), rule.higher_is_better(guard))
            if high < -tolerance:
                failed.append(f"guard {guard} FAILED: {point:+.2f} % [{low:+.2f}, {high:+.2f}] below -{tolerance:g} %")
    higher, bar = rule.higher_is_better(rule.primary), rule.bar_pct
    point, low, high = signed(primary.interval(candidate, levels.win), higher)
    loss_high = signed(primary.interval(candidate, levels.loss), higher)[2]
    eq_low, eq_high = signed(primary.interval(candidate, levels.equivalence), higher)[1:]
    said = (
        f"{rule.primary} {point:+.2f} % [{low:+.2f}, {high:+.2f}] (WIN interval {100 * levels.win:.4g}%, LOSS "
        f"reads its {100 * levels.loss:.4g}% upper end {loss_high:+.2f}, equivalence [{eq_low:+.2f}, {eq_high:+.2f}]"
        f", df {primary.df:g}), bar {bar:g} %"
    )
    state: CellState = "OPEN"
    if failed or (point < -bar and loss_high < 0):
        state = "LOSS"
    elif point > bar and low > 0:
        state = "WIN"
    elif -bar < eq_low and eq_high < bar:
        state = "NO-CHANGE"
    elif eq_high < bar:
        state = "FUTILE"
    return Judged(state, (point, low, high), (said, *failed), tuple(failed))


def arm_state(cells: Sequence[CellState]) -> ArmState:
    """A candidate over its deciding cells: INCONCLUSIVE or LOSS in any; WIN or NO-CHANGE in all; NEUTRAL once it
    cannot WIN (a cell futile, or settled otherwise than WIN); else still open."""
    for blocking in ("INCONCLUSIVE", "LOSS"):
        if blocking in cells:
            return blocking
    for unanimous in ("WIN", "NO-CHANGE"):
        if all(state == unanimous for state in cells):
            return unanimous
    if any(state not in ("WIN", "OPEN") for state in cells):
        return "NEUTRAL"
    return "OPEN"


@dataclass
class RoundLook:
    """One look: after which round and start, and every candidate's state in every deciding cell there."""

    round: int
    after: int  # starts run by then
    index: int  # the rule's look number whose levels it read
    judged: dict[str, dict[str, Judged]]  # candidate -> cell -> judged (only candidates open before it)
    states: dict[str, ArmState]  # every candidate: its state after this look
    fits: dict[str, Fits]  # each deciding cell's fits at this look: what the document states, not fitted again


@dataclass
class Rounds:
    """The window's rounds as the rule replays them."""

    candidates: tuple[str, ...]
    looks: list[RoundLook] = field(default_factory=list)
    settled_at: dict[str, int] = field(default_factory=dict)  # candidate -> the look (index in looks) it settled
    rounds_run: int = 0
    starts_run: int = 0
    problems: list[str] = field(default_factory=list)
    decided: bool = False  # every candidate settled at a look

    def state(self, candidate: str) -> ArmState:
        return self.looks[-1].states[candidate] if self.looks else "OPEN"


def run_rounds(
    tables: dict[str, ArmsTable], rule: RuleSpec, context: WindowContext, candidates: Sequence[str]
) -> Rounds:
    """Every look in order until every candidate is settled or the rows end (``tables``: the deciding cells')."""
    assert rule.rounds
    found = Rounds(tuple(candidates))
    failed = {f.candidate: f.round for f in context.failed_starts}
    first = next(iter(tables.values()))
    in_play, start, number = set(candidates), 0, 0
    while start < len(first.starts) and number < rule.rounds[-1]:
        in_play -= {c for c in in_play if failed.get(c) == number + 1}  # its start in this round failed: no rows
        end = min(start + 1 + len(in_play), len(first.starts))
        ran = first.arms[start:end]
        complete = end - start == 1 + len(in_play)
        if complete and ({arm for arm in ran if arm is not None} != in_play or None not in ran):
            shown = ", ".join(sorted(arm or "the control" for arm in ran))
            found.problems.append(f"round {number + 1} ran {shown}; the rule had {', '.join(sorted(in_play))} in play")
            return found
        number, start = number + complete, end
        found.starts_run, found.rounds_run = end, number
        ended = end >= len(first.starts)
        if (complete and number in rule.rounds) or ended:
            # A window that ended between looks is judged over what it ran, at the next look's levels.
            upcoming = number + (not complete)
            index = next((i for i, r in enumerate(rule.rounds) if r >= upcoming), len(rule.rounds) - 1)
            _look(found, tables, rule, context, (number, end, index), in_play)
            in_play = {c for c in candidates if found.state(c) == "OPEN"}
            if not in_play:
                found.decided = complete and number in rule.rounds  # a registered look settled them all
                break
    return found


def _look(
    found: Rounds,
    tables: dict[str, ArmsTable],
    rule: RuleSpec,
    context: WindowContext,
    where: tuple[int, int, int],
    in_play: set[str],
) -> None:
    """The look after round ``number`` and ``after`` starts, at the rule's look ``index``'s levels. A candidate
    still open stays so here, even at the last round: the document says why it ended open (NEUTRAL)."""
    number, after, index = where
    levels = levels_at(rule, len(found.candidates), index)
    fits = {cell: fits_at(table.upto(after), rule, context) for cell, table in tables.items()}
    judged = {c: {cell: judge(f, c, rule, levels, context) for cell, f in fits.items()} for c in sorted(in_play)}
    states = {c: found.state(c) for c in found.candidates}
    for candidate in found.candidates:  # a start that failed by this round settles its candidate INCONCLUSIVE
        if states[candidate] == "OPEN" and candidate not in in_play and candidate not in found.settled_at:
            states[candidate] = "INCONCLUSIVE"
            found.settled_at[candidate] = len(found.looks)
    for candidate, cells in judged.items():
        states[candidate] = arm_state([j.state for j in cells.values()])
        if states[candidate] != "OPEN":
            found.settled_at[candidate] = len(found.looks)
    found.looks.append(RoundLook(number, after, index, judged, states, fits))
