"""Decisions: registered rules and pure functions from pooled rows to a decision document."""

from fairwin.decision.decide import Decision, decide
from fairwin.decision.paired import PairedEstimate, Verdict, paired_estimate, verdict_for
from fairwin.decision.rules import RULES, WIN2_V1, RuleSpec, get_rule

__all__ = [
    "RULES",
    "WIN2_V1",
    "Decision",
    "PairedEstimate",
    "RuleSpec",
    "Verdict",
    "decide",
    "get_rule",
    "paired_estimate",
    "verdict_for",
]
