"""The decision document (``fairwin.decision/4``): what was decided, on what, and why."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from fairwin.decision.divergence import GreedyFindings
from fairwin.decision.inputs import ArchiveNoise
from fairwin.decision.paired import Estimate, Verdict
from fairwin.decision.validity import Validity
from fairwin.formats import DECISION, DECISIONS, RecordFormat
from fairwin.profiles import ProfileName
from fairwin.records import Record
from fairwin.rows import MetricSource
from fairwin.rules.spec import RuleSpec


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MetricResult(Frozen):
    metric: str
    higher_is_better: bool
    verdict: Verdict
    estimate: Estimate | None
    reasons: list[str]


class GuardResult(Frozen):
    metric: str
    failed: bool | None  # None: could not be judged (missing data)
    detail: str
    repeats_below: list[int] | None = None  # win2: repeats where the candidate was below both controls
    estimate: Estimate | None = None  # launch: the guard's own interval


class Noise(Frozen):
    """The in-window spread of the first kind's starts (OFF/OFF in a control-first bracket), next to the
    archive's day-to-day spread and the bar."""

    metric: str
    bar_pct: float
    off_off_spread_pct: list[float]
    archive: ArchiveNoise | None
    notes: list[str]


class CellDecision(Frozen):
    cell: str
    decides: bool
    verdict: Verdict
    reasons: list[str]
    validity: Validity | None
    primary: MetricResult | None
    guards: list[GuardResult]
    reported: list[MetricResult]
    checklist_literal: MetricResult | None
    noise: Noise | None

    @classmethod
    def unjudged(cls, cell: str, decides: bool, reasons: list[str], validity: Validity | None = None) -> CellDecision:
        """INCONCLUSIVE, with why and nothing estimated."""
        return cls(
            cell=cell,
            decides=decides,
            verdict="INCONCLUSIVE",
            reasons=reasons,
            validity=validity,
            primary=None,
            guards=[],
            reported=[],
            checklist_literal=None,
            noise=None,
        )


class SealedInputs(Frozen):
    """The sha256 of the stored files a window's decision was computed from (``fairwin decide`` checks them)."""

    pooled_sha256: str
    context_sha256: str
    manifest_sha256: str  # window.json: the rule, order and starts the window ran


LookVerdict = Literal["WIN", "LOSS", "NEUTRAL", "NO-CHANGE", "INCONCLUSIVE", "CONTINUE"]
#: How a sequential window ended: a look settled it; it ran its maximum; its budget stopped it before; or it
#: ended between looks for another reason (killed, and recovered).
Ended = Literal["decided", "maximum", "budget", "short"]


class Look(Frozen):
    """One look of a sequential window: after how many starts, at which level, and what it found."""

    after: int
    verdict: LookVerdict  # the window's: CONTINUE while it goes on
    level: float  # the two-sided confidence of the look's WIN/LOSS interval (its nominal level, not the rule's)
    cells: dict[str, LookVerdict]
    primary: dict[str, tuple[float, float, float]]  # cell -> the primary's point, low, high in % at this look


class Stopping(Frozen):
    """How a sequential window ended, look by look."""

    looks: list[Look]
    starts_used: int
    max_starts: int
    ended: Ended
    stop_reason: str | None = None  # the budget's words, when it stopped the window

    def line(self, verdict: str) -> str:
        """'decided WIN after 5 of at most 9 starts' and the like."""
        if self.ended == "decided":
            return f"decided {verdict} after {self.starts_used} of at most {self.max_starts} starts"
        if self.ended == "maximum":
            return f"no look decided before the maximum of {self.max_starts} starts: {verdict}"
        if self.ended == "budget":
            return f"stopped at the budget after {self.starts_used} of {self.max_starts} starts: {verdict}"
        return f"ended after {self.starts_used} of at most {self.max_starts} starts, between looks: {verdict}"


class ArmLook(Frozen):
    """One look of a many-arm window: after which round and start, and every candidate's state there."""

    round: int
    after: int  # starts run by then
    level: float  # the two-sided confidence of the look's WIN interval (the family's, split over the candidates)
    states: dict[str, LookVerdict]  # candidate -> its verdict once settled (NEUTRAL: it cannot WIN), else CONTINUE
    primary: dict[str, tuple[float, float, float]]  # candidate -> the first deciding cell's point, low, high in %


class Arm(Frozen):
    """One candidate of a many-arm window: its verdict, the look that settled it and its cells there."""

    candidate: str
    verdict: Verdict
    settled_after_round: int | None  # None: still open when the window ended
    dropped: bool  # settled before the window's last round ran: not launched again
    why: str
    cells: list[CellDecision]


class Ranking(Frozen):
    """Among the candidates called WIN: the best, and whether it is separated from the next best WIN."""

    best: str | None
    runner_up: str | None
    difference_pct: tuple[float, float, float] | None  # best over runner-up: point, low, high in %
    confidence: float
    separated: bool | None  # the interval of the difference above 0; None: fewer than two WINs
    line: str


class ArmsOutcome(Frozen):
    """How a many-arm window ended: every candidate's verdict, the looks, and the best of the WINs."""

    candidates: list[str]
    arms: list[Arm]
    looks: list[ArmLook]
    rounds_run: int
    starts_used: int
    max_starts: int
    ended: Ended
    ranking: Ranking
    stop_reason: str | None = None

    def line(self) -> str:
        """'every candidate settled after 3 rounds (12 of at most 20 starts)' and the like."""
        used = f"{self.starts_used} of at most {self.max_starts} starts"
        rounds = f"{self.rounds_run} round{'' if self.rounds_run == 1 else 's'}"
        if self.ended == "decided":
            return f"every candidate settled after {rounds} ({used})"
        if self.ended == "maximum":
            return f"the last round ran ({used}); a candidate still open is NEUTRAL"
        if self.ended == "budget":
            return f"stopped at the budget after {rounds} ({used})"
        return f"ended after {self.rounds_run} whole round{'' if self.rounds_run == 1 else 's'}, between looks ({used})"


def level_text(confidence: float) -> str:
    """An interval's two-sided level as a reason states it: ``95%``, ``99.75%`` (``fairwin.decision/2`` rounded it
    to a whole percent: a look's 99.75 % interval read ``(100%)``)."""
    return f"{100 * confidence:.4g}%"


class Decision(Frozen, Record):
    """``fairwin.decision/4``: a window's verdict, every cell's, and the rule that gave them. A many-arm window's
    ``arms`` holds every candidate's; its ``cells`` are the best WIN's (else the first candidate's). ``/3`` (no
    ``arms``) and ``/2`` (whose reasons rounded an interval's level to a whole percent) are still read."""

    record_format: ClassVar[RecordFormat] = DECISION

    format: Literal["fairwin.decision/2", "fairwin.decision/3", "fairwin.decision/4"] = "fairwin.decision/4"
    window_id: str
    mode: str
    order: str
    rule_id: str
    rule: RuleSpec
    rule_sha256: str
    # Who measured the primary: the server's counters, or fairwin's client (a server whose counters
    # fairwin does not read). Derived from the rule, so a recomputation always agrees with the record.
    primary_source: MetricSource = "server"
    # The server profile whose counters the rows pooled (vllm, llamacpp; none: client-only), from the context.
    counters: ProfileName | None = None
    verdict: Verdict
    reasons: list[str]
    cells: list[CellDecision]
    inputs: SealedInputs | None = None  # set when a window's decision is written; None for rows decided alone
    # Correctness beside the speed verdict: a real greedy divergence never changes the verdict, but a
    # promotion refuses on it. None when the window ran no greedy diagnostics.
    greedy: GreedyFindings | None = None
    # A sequential rule's looks and how the window ended (None for a fixed rule).
    sequential: Stopping | None = None
    # The checks that could not observe their input and that the plan accepted so (runtime.accept_unobserved).
    unobserved: list[str] = []
    # A many-arm rule's candidates, looks and ranking (None for a two-arm window).
    arms: ArmsOutcome | None = None


class DecisionsPrinted(Record):
    """``fairwin.decisions/1``: what ``fairwin decide --json`` prints, one shape whatever the number of rules:
    the decisions in the order the rules were named, and the notes on the recomputation."""

    record_format: ClassVar[RecordFormat] = DECISIONS
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["fairwin.decisions/1"] = "fairwin.decisions/1"
    decisions: list[Decision]
    notes: list[str]
