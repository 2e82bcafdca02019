"""The sequential procedure: the alternating fit, looked at after registered numbers of starts.

A sequential rule (``win2-seq-v1``, ``win2-seq-v2``) runs its window until a look decides. At each
look, after k starts, every deciding cell is judged as win2-alt7-v1 would judge a
window of k starts, but at that look's nominal level: the rule registers, per look,
the one-sided tail probability its boundary spends (a Lan-DeMets spending function
over the looks' information, tools/sequential_boundaries.py), so the chance of ever
crossing under no change stays what the rule promises however many looks are taken.
The interval at a look uses Student's t with the look's own degrees of freedom (the
fit's residuals plus the archive's, which win2-seq-v2 counts at half: one archived
spread is shared by every look, and levels spent for a known spread let it through
too often), at the same tail probability.

A cell that crosses (WIN, LOSS, NO-CHANGE) or cannot be judged (INCONCLUSIVE) keeps
that verdict; the window stops when its verdict is settled: a deciding cell LOSS or
INCONCLUSIVE, or every deciding cell crossed. At the last look a cell that never
crossed is NEUTRAL. A window that ended between looks (killed, or stopped by its
budget) is decided at a last look over the starts it finished, at the level of the
next look its archive allows. Pure: rows in, document out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fairwin.decision.document import CellDecision, Ended, Look, LookVerdict, Stopping
from fairwin.decision.inputs import ArchiveNoise, DecisionRow, WindowContext
from fairwin.decision.paired import Verdict
from fairwin.rules.spec import RuleSpec

SETTLED = ("WIN", "LOSS", "NO-CHANGE", "INCONCLUSIVE")


def fewest_archived_starts(noise: Sequence[ArchiveNoise], cells: Sequence[str], metric: str) -> int:
    """The fewest archived control starts (with a launch spread) behind ``metric`` in any of ``cells``."""
    counts = [
        next((n.starts for n in noise if n.cell == cell and n.metric == metric and n.launch_cv_pct is not None), 0)
        for cell in cells
    ]
    return min(counts, default=0)


def archive_starts(rule: RuleSpec, context: WindowContext) -> int:
    """The fewest archived control starts behind the primary of any deciding cell: what the first look needs."""
    deciding = [cell for cell in context.cells if cell not in context.reported]
    return fewest_archived_starts(context.archive, deciding, rule.primary)


def look_points(rule: RuleSpec, context: WindowContext, ran: int) -> list[int]:
    """The looks taken over ``ran`` finished starts: the registered ones reached, and a last one at ``ran``
    when the window ended past its last look reached but before its maximum."""
    taken = rule.looks_taken(archive_starts(rule, context))
    points = [k for k in taken if k <= ran]
    if ran >= taken[0] and ran not in points:
        points.append(ran)
    return points


def rule_at_look(rule: RuleSpec, starts: int, taken: Sequence[int] | None = None) -> RuleSpec:
    """The alternating rule that judges one look: ``starts`` starts, at the look's nominal levels. A window that
    ended between looks is judged at the level of the next look among ``taken``, the looks its archive allows
    (default: every registered one), never at a look the window could not take."""
    assert rule.looks and rule.look_levels and rule.equivalence_levels  # a sequential rule registers all three
    allowed = [k for k in (taken or rule.looks) if k >= starts]
    index = rule.looks.index(allowed[0]) if allowed else len(rule.looks) - 1
    guard_alpha = (1.0 - (rule.guard_confidence or rule.confidence)) / len(rule.looks)  # Bonferroni over looks
    # model_copy: a derived rule, never registered or stored; the decision records the sequential rule itself.
    return rule.model_copy(
        update={
            "kind": "alternating",
            "starts": starts,
            "looks": None,
            "look_levels": None,
            "equivalence_levels": None,
            "confidence": 1.0 - 2.0 * rule.look_levels[index],
            "equivalence_confidence": 1.0 - 2.0 * rule.equivalence_levels[index],
            "guard_confidence": 1.0 - guard_alpha,
        }
    )


CellJudge = Callable[[Sequence[DecisionRow], str, RuleSpec, WindowContext], CellDecision]
WindowJudge = Callable[[Sequence[CellDecision]], tuple[Verdict, list[str]]]


def _primary(decision: CellDecision) -> tuple[float, float, float] | None:
    estimate = decision.primary.estimate if decision.primary is not None else None
    return None if estimate is None else (estimate.point_pct, estimate.ci_low_pct, estimate.ci_high_pct)


def _settled(cells: dict[str, CellDecision], context: WindowContext) -> bool:
    """The window's verdict can no longer change: a deciding cell LOSS or INCONCLUSIVE, or every one crossed."""
    deciding = [c for c in context.cells if c not in context.reported]
    verdicts = [cells[c].verdict for c in deciding if c in cells]
    return any(v in ("LOSS", "INCONCLUSIVE") for v in verdicts) or len(verdicts) == len(deciding)


def judge_looks(
    rows: Sequence[DecisionRow],
    rule: RuleSpec,
    context: WindowContext,
    judge_cell: CellJudge,
    judge_window: WindowJudge,
) -> tuple[list[CellDecision], Stopping]:
    """Every look in order until one settles the window (``judge_cell``: decide.decide_cell, passed in so that
    this module and decide.py need not import each other)."""
    ran = len({row.start for row in rows})
    taken = rule.looks_taken(archive_starts(rule, context))
    points = look_points(rule, context, ran)
    if not points:  # fewer starts than the first look: judged as they are, which says what is missing
        points = [max(ran, 3)]
    settled: dict[str, CellDecision] = {}
    looks: list[Look] = []
    for k in points:
        subset = [row for row in rows if int(row.start[1:]) <= k]
        at_look = rule_at_look(rule, k, taken)
        now = {c: settled.get(c) or judge_cell(subset, c, at_look, context) for c in context.cells}
        settled.update({c: d for c, d in now.items() if d.verdict in SETTLED})
        stop = _settled(settled, context)
        # A look that settles nothing says CONTINUE, even the last one a window stopped early took: the window's
        # verdict (NEUTRAL) and how it ended say the rest. At the maximum every open cell is NEUTRAL.
        final = stop or k >= rule.start_count
        verdict: LookVerdict = judge_window(list(now.values()))[0] if final else "CONTINUE"
        looks.append(
            Look(
                after=k,
                verdict=verdict,
                level=at_look.confidence,
                cells={c: (d.verdict if c in settled or final else "CONTINUE") for c, d in now.items()},
                primary={c: p for c, d in now.items() if (p := _primary(d)) is not None},
            )
        )
        last = k == points[-1]
        if stop or last:
            return list(now.values()), _stopping(rule, context, looks, ran, stop)
    raise AssertionError("unreachable: the last look always returns")


def _stopping(rule: RuleSpec, context: WindowContext, looks: list[Look], ran: int, decided: bool) -> Stopping:
    ended: Ended
    if decided:
        ended = "decided"
    elif ran >= rule.start_count:
        ended = "maximum"
    else:
        ended = "budget" if context.stop_reason else "short"
    # The starts the verdict rests on: the deciding (or last) look's, never rows past it (a replay of a window
    # that ran on, or of a fixed rule's rows), and never more than ran.
    used = min(looks[-1].after, ran)
    return Stopping(
        looks=looks, starts_used=used, max_starts=rule.start_count, ended=ended, stop_reason=context.stop_reason
    )
