"""The decision document (``fairwin.decision/2``): what was decided, on what, and why."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from fairwin.decision.greedy import GreedyFindings
from fairwin.decision.inputs import ArchiveNoise
from fairwin.decision.paired import Estimate, Verdict
from fairwin.decision.rules import RuleSpec
from fairwin.decision.validity import Validity
from fairwin.vocabulary import DECISION, MetricSource


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


class SealedInputs(Frozen):
    """The sha256 of the stored files a window's decision was computed from (``fairwin decide`` checks them)."""

    pooled_sha256: str
    context_sha256: str
    manifest_sha256: str  # window.json: the rule, order and starts the window ran


class Decision(Frozen):
    format: str = DECISION.id
    window_id: str
    mode: str
    order: str
    rule_id: str
    rule: RuleSpec
    rule_sha256: str
    # Who measured the primary: the server's counters, or fairwin's client (a server whose counters
    # fairwin does not read). Derived from the rule, so a recomputation always agrees with the record.
    primary_source: MetricSource = "server"
    verdict: Verdict
    reasons: list[str]
    cells: list[CellDecision]
    inputs: SealedInputs | None = None  # set when a window's decision is written; None for rows decided alone
    # Correctness beside the speed verdict: a real greedy divergence never changes the verdict, but a
    # promotion refuses on it. None when the window ran no greedy diagnostics.
    greedy: GreedyFindings | None = None
