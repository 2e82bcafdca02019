"""A many-arm window's looks between its rounds: which candidates stay in play, and whether it goes on.

A look is the decide step's replay of the rows so far (the same stored rows, the same archive noise),
so the candidates it drops are the ones ``fairwin decide WINDOW`` says were settled there. A settled
candidate is launched in no later round; the window stops when none is left in play, or when its next
round would not fit the budget, measured against the time really spent (gates/budget.py).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from fairwin.decision import Verdict, decide
from fairwin.decision.document import ArmLook
from fairwin.directory.gate_summary import BudgetEstimate
from fairwin.directory.layout import WindowDir
from fairwin.directory.window_records import WindowRecords
from fairwin.gates.budget import next_pair_refused
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.models import BudgetSettings
from fairwin.plan.schedule import StartSpec
from fairwin.verdict.stored import Deciding, window_context
from fairwin.window.looks import LookEnd


@dataclass(frozen=True)
class RoundResult:
    """What a many-arm window's look found: every candidate's state, the window's verdict were it to stop now, and
    why it runs no more rounds (None: it goes on)."""

    look: ArmLook | None
    verdict: Verdict
    stopped: str | None
    problems: tuple[str, ...] = ()

    @property
    def dropped(self) -> set[str]:
        """The candidates settled by now: none is launched again."""
        return {c for c, state in self.look.states.items() if state != "CONTINUE"} if self.look else set()

    def line(self, after: int) -> str:
        """``look after round 2 (s8): b1 WIN +21.3 % [+6.8, +37.8]; b2 CONTINUE ...``, and why it stops."""
        if self.look is None:
            return f"look after s{after}: nothing to decide ({'; '.join(self.problems)}); stopped"
        shown = []
        for candidate, state in self.look.states.items():
            found = self.look.primary.get(candidate)
            interval = f" {found[0]:+.1f} % [{found[1]:+.1f}, {found[2]:+.1f}]" if found else ""
            shown.append(f"{candidate} {'cannot WIN' if state == 'NEUTRAL' else state}{interval}")
        line = f"look after round {self.look.round} (s{after}): {'; '.join(shown)}"
        return line + (f"; stopped: {self.stopped}" if self.stopped not in (None, "decided") else "")

    def record(self) -> LookEnd:
        """The look step's journaled end."""
        if self.look is None:
            return LookEnd(taken=False, why="; ".join(self.problems), stopped=self.stopped)
        return LookEnd(
            verdict="CONTINUE" if self.stopped is None else self.verdict,
            level=self.look.level,
            stopped=self.stopped,
            arms=self.look.states,
            dropped=sorted(self.dropped),
        )


def round_look(loaded: LoadedPlan, window: WindowDir, deciding: Deciding) -> tuple[ArmLook | None, Verdict, list[str]]:
    """The look over the rounds finished so far, as the decide step will replay it; or why nothing decides."""
    records = WindowRecords.read(window)  # each of the window's files read once for this look
    context = window_context(loaded, window, deciding, records)
    decision = decide(records.pooled, rule=deciding.rule, context=context)
    if decision.arms is None:
        return None, decision.verdict, decision.reasons
    return decision.arms.looks[-1], decision.verdict, []


def go_on_or_stop_rounds(
    found: tuple[ArmLook | None, Verdict, list[str]],
    after: int,
    planned: Sequence[StartSpec],
    budget: BudgetEstimate,
    elapsed_s: float,
    limits: BudgetSettings,
) -> RoundResult:
    """Stop when every candidate is settled (or nothing can be decided: fail closed); else when the next round, its
    candidates still in play and the control, would not fit the budget."""
    look, verdict, problems = found
    if look is None:
        return RoundResult(None, verdict, "the rows so far cannot be decided", tuple(problems))
    open_ = {c for c, state in look.states.items() if state == "CONTINUE"}
    if not open_:
        return RoundResult(look, verdict, "decided")
    upcoming = next_round(planned, after, open_)
    return RoundResult(look, verdict, next_pair_refused(budget, upcoming, look.after, elapsed_s, limits))


def next_round(planned: Sequence[StartSpec], after: int, in_play: Collection[str]) -> list[StartSpec]:
    """The starts of the round after planned start ``after`` that will run: the control's and those in play."""
    later = planned[after:]
    if not later:
        return []
    number = later[0].round
    return [s for s in later if s.round == number and (s.kind == "control" or s.role in in_play)]
