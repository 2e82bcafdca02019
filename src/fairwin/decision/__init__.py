"""Decisions: pure functions from pooled rows to a decision document, and the registered rules (fairwin/rules/) they
apply, re-exported here."""

from fairwin.decision.audit import AuditResult, audit
from fairwin.decision.decide import decide, decide_cell, procedure_for, window_verdict
from fairwin.decision.document import CellDecision, Decision, GuardResult, MetricResult, Noise, SealedInputs
from fairwin.decision.inputs import ArchiveNoise, ArchiveSnapshot, DecisionRow, FailedStart, WindowContext
from fairwin.decision.paired import Estimate, Verdict, paired_t, verdict_for
from fairwin.decision.procedures import PlannedError, Procedure
from fairwin.rules.registry import (
    DEFAULT_RULE,
    RULES,
    WIN2_ALT7_CLIENT_V1,
    WIN2_ALT7_V1,
    WIN2_LAUNCH_V1,
    WIN2_SEQ_V1,
    WIN2_SEQ_V2,
    WIN2_V1,
    get_rule,
)
from fairwin.rules.spec import RuleSpec

__all__ = [
    "DEFAULT_RULE",
    "RULES",
    "WIN2_ALT7_CLIENT_V1",
    "WIN2_ALT7_V1",
    "WIN2_LAUNCH_V1",
    "WIN2_SEQ_V1",
    "WIN2_SEQ_V2",
    "WIN2_V1",
    "ArchiveNoise",
    "ArchiveSnapshot",
    "AuditResult",
    "CellDecision",
    "Decision",
    "DecisionRow",
    "Estimate",
    "FailedStart",
    "GuardResult",
    "MetricResult",
    "Noise",
    "PlannedError",
    "Procedure",
    "RuleSpec",
    "SealedInputs",
    "Verdict",
    "WindowContext",
    "audit",
    "decide",
    "decide_cell",
    "get_rule",
    "paired_t",
    "procedure_for",
    "verdict_for",
    "window_verdict",
]
