"""Registered decision rules.

A rule is data: its id and every parameter. Its sha256 is taken over the canonical
JSON of that data, so a decision records exactly which rule decided it, and changing
any parameter means registering a new id: the bar is never moved silently.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from fairwin.errors import InputError
from fairwin.receipts import canonical_json, sha256_bytes

#: Metrics where a smaller value is better; every other metric is higher-is-better.
LOWER_IS_BETTER = ("ms_per_round", "ttft_s")


class RuleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    kind: Literal["win2", "launch"] = Field(description="The decision procedure the parameters feed.")
    description: str
    primary: str = Field(description="Pooled-row field the verdict is decided on.")
    guards: tuple[str, ...] = Field(description="Higher-is-better fields that can only cause LOSS.")
    reported: tuple[str, ...] = Field(description="Fields given their own verdict, never deciding.")
    checklist_primary: str | None = Field(description="The alternative primary recorded as checklist_literal.")
    lower_is_better: tuple[str, ...] = LOWER_IS_BETTER
    bar_pct: float = Field(description="WIN needs point > +bar, LOSS point < -bar.")
    confidence: float = Field(description="Two-sided interval level for WIN and LOSS.")
    guard_fail_repeats: int | None = Field(
        None, description="win2: a guard fails when the candidate is below both controls in this many repeats."
    )
    guard_tolerance_pct: float | None = Field(
        None, description="launch: a guard fails when its whole interval lies below -tolerance."
    )
    equivalence_confidence: float | None = Field(
        None, description="launch: NO-CHANGE when this interval lies within +-bar (two one-sided tests)."
    )
    order: Literal["control-first", "random"] = Field(
        description="control-first: s1, s3 control; random: control-candidate-control or candidate-control-candidate."
    )

    @property
    def sha256(self) -> str:
        return sha256_bytes(canonical_json(self.model_dump(mode="json")).encode("utf-8"))

    def higher_is_better(self, metric: str) -> bool:
        return metric not in self.lower_is_better


WIN2_V1 = RuleSpec(
    id="win2-v1",
    kind="win2",
    description=(
        "Paired by repeat (control = mean of s1 and s3, candidate = s2). Primary pooled_rate_tps: WIN when "
        "the point is above +2 % and the 95 % paired-t interval excludes 0; LOSS when below -2 % and the "
        "interval excludes 0. Guards accepted_per_round and decode_tps can only cause LOSS: a guard fails "
        "when the candidate is below both controls in at least 2 repeats. ms_per_round and ttft_s are "
        "reported with their own verdict. INCONCLUSIVE on mixed or non-production clock caps, a thermal "
        "dial-back, or a missing metric."
    ),
    primary="pooled_rate_tps",
    guards=("accepted_per_round", "decode_tps"),
    reported=("ms_per_round", "ttft_s"),
    checklist_primary="ms_per_round",
    bar_pct=2.0,
    confidence=0.95,
    guard_fail_repeats=2,
    order="control-first",
)

WIN2_LAUNCH_V1 = RuleSpec(
    id="win2-launch-v1",
    kind="launch",
    description=(
        "win2-v1's question with the launch as a unit of variance. The interval of the primary's paired "
        "difference uses a two-level model (launches, and repeats within a launch): the launch-to-launch "
        "variance is estimated from the in-window bracketing pair and the control archive, so a verdict "
        "cannot be won on within-launch repeats alone. WIN/LOSS beyond +-2 % with the 95 % interval "
        "excluding 0; NO-CHANGE when the 90 % interval lies within +-2 %; guards fail only when their own "
        "interval lies wholly below -3 %. The order (control-candidate-control or candidate-control-"
        "candidate) is drawn at random per window."
    ),
    primary="pooled_rate_tps",
    guards=("accepted_per_round", "decode_tps"),
    reported=("ms_per_round", "ttft_s"),
    checklist_primary="ms_per_round",
    bar_pct=2.0,
    confidence=0.95,
    guard_tolerance_pct=3.0,
    equivalence_confidence=0.90,
    order="random",
)

RULES: dict[str, RuleSpec] = {rule.id: rule for rule in (WIN2_V1, WIN2_LAUNCH_V1)}


def get_rule(rule_id: str) -> RuleSpec:
    try:
        return RULES[rule_id]
    except KeyError:
        raise InputError(f"no registered rule {rule_id!r}; registered: {', '.join(sorted(RULES))}") from None
