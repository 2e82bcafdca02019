"""Registered decision rules.

A rule is data: its id and every parameter. Its sha256 is taken over the canonical
JSON of that data, so a decision records exactly which rule decided it, and changing
any parameter means registering a new id: the bar is never moved silently.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from fairwin.errors import InputError
from fairwin.receipts import canonical_json, sha256_bytes


class RuleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    description: str
    primary: str = Field(description="Pooled-row field the verdict is decided on.")
    higher_is_better: bool = True
    bar_pct: float = Field(description="WIN needs point > +bar, LOSS point < -bar.")
    confidence: float = Field(description="Two-sided paired-t interval level.")
    pairing: str = "repeat: control = mean(s1, s3), candidate = s2"

    @property
    def sha256(self) -> str:
        return sha256_bytes(canonical_json(self.model_dump(mode="json")).encode("utf-8"))


WIN2_V1 = RuleSpec(
    id="win2-v1",
    description=(
        "Paired by repeat. Primary pooled_rate_tps: WIN when the point is above +2 % and the 95 % "
        "paired-t interval excludes 0; LOSS when below -2 % and the interval excludes 0; else NEUTRAL."
    ),
    primary="pooled_rate_tps",
    higher_is_better=True,
    bar_pct=2.0,
    confidence=0.95,
)

RULES: dict[str, RuleSpec] = {rule.id: rule for rule in (WIN2_V1,)}


def get_rule(rule_id: str) -> RuleSpec:
    try:
        return RULES[rule_id]
    except KeyError:
        raise InputError(f"no registered rule {rule_id!r}; registered: {', '.join(sorted(RULES))}") from None
