"""The registered decision rules: every rule a decision may name, by id, and the default.

A registered rule is never changed: a different parameter is a new id (rules.py), so a
stored decision always recomputes under the rule it names.
"""

from __future__ import annotations

from typing import Any

from fairwin.errors import InputError
from fairwin.rules.spec import RuleSpec

#: What every win2 rule asks: the primary, the guards, the reported metrics and the bar, at 95 %.
WIN2_QUESTION: dict[str, Any] = {
    "primary": "pooled_rate_tps",
    "guards": ("accepted_per_round", "decode_tps"),
    "reported": ("ms_per_round", "ttft_s"),
    "checklist_primary": "ms_per_round",
    "bar_pct": 2.0,
    "confidence": 0.95,
}

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
    **WIN2_QUESTION,
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
    **WIN2_QUESTION,
    guard_tolerance_pct=3.0,
    equivalence_confidence=0.90,
    order="random",
)

WIN2_ALT7_V1 = RuleSpec(
    id="win2-alt7-v1",
    kind="alternating",
    description=(
        "win2-v1's question over seven starts, control and candidate taking turns (the first kind drawn at "
        "random per window), each start one launch. The primary's interval comes from each start's mean over "
        "its repeats, on a log scale, fitted with a level, a linear drift and the candidate's effect; the "
        "launch variance is estimated from the residuals (4 degrees of freedom), pooled with the control "
        "archive's launch spread, and never below the within-launch repeat variance over n. WIN/LOSS beyond "
        "+-2 % with the 95 % interval excluding 0; NO-CHANGE when the 90 % interval lies within +-2 %; a guard "
        "fails only when its own 99 % interval lies wholly below -3 %."
    ),
    **WIN2_QUESTION,
    guard_tolerance_pct=3.0,
    equivalence_confidence=0.90,
    order="random",
    starts=7,
    guard_confidence=0.99,
)

#: win2-alt7-v1's procedure, every field of it, asking the client's question instead of the server's.
WIN2_ALT7_CLIENT_V1 = RuleSpec.model_validate(
    {
        **WIN2_ALT7_V1.model_dump(),
        "id": "win2-alt7-client-v1",
        "description": (
            "win2-alt7-v1's procedure for a server whose counters fairwin does not read (window.counters = "
            '"none"): the primary is the client\'s decode rate, decode_tps (tokens after the first over first-to-'
            "last-token seconds, trusted streams only), with ttft_s reported. Seven alternating starts, log-scale "
            "fit with level, drift and effect; WIN/LOSS beyond +-2 % with the 95 % interval excluding 0; NO-CHANGE "
            "when the 90 % interval lies within +-2 %. No guard: accepted tokens per round need the server's "
            "counters."
        ),
        "primary": "decode_tps",
        "guards": (),
        "reported": ("ttft_s",),
        "checklist_primary": None,
    }
)

WIN2_SEQ_V1 = RuleSpec(
    id="win2-seq-v1",
    kind="sequential",
    description=(
        "win2-alt7-v1's question and fit, looked at as the window runs: control and candidate take turns (the "
        "first kind drawn at random per window), and after 3 (with at least 10 archived control starts), 5, 7 "
        "and 9 starts the window decides or goes on. Each look judges the starts so far with win2-alt7-v1's "
        "log-scale fit (level, drift, effect; launch variance pooled with the archive) at that look's nominal "
        "level: Lan-DeMets spending of Pocock's shape, one-sided 2.5 % for WIN and for LOSS and 5 % for each of "
        "NO-CHANGE's two tests, over the looks' information (t quantiles at each look's degrees of freedom). "
        "WIN/LOSS beyond +-2 % with the look's interval excluding 0; NO-CHANGE when the look's equivalence "
        "interval lies within +-2 %; a guard fails when its 99 % interval, split evenly over the looks, lies wholly "
        "below -3 %, and a failed guard stops the window with LOSS. A cell keeps the verdict of the look it "
        "crossed at; the window stops once its verdict is settled, and a cell still open after 9 starts is NEUTRAL."
    ),
    **WIN2_QUESTION,
    guard_tolerance_pct=3.0,
    equivalence_confidence=0.90,
    order="random",
    guard_confidence=0.99,
    looks=(3, 5, 7, 9),
    # python tools/sequential_boundaries.py --looks 3 5 7 9 --alpha 0.025 --shape pocock (and --alpha 0.05)
    look_levels=(0.010393, 0.009014, 0.008997, 0.009122),
    equivalence_levels=(0.020787, 0.019202, 0.019752, 0.020441),
    spending="lan-demets pocock; one-sided 0.025 (WIN, LOSS), 0.05 (each NO-CHANGE test); information 1/var factor",
    first_look_archive_starts=10,
)

WIN2_SEQ_V2 = RuleSpec(
    **{
        **WIN2_SEQ_V1.model_dump(),
        "id": "win2-seq-v2",
        "description": (
            "win2-seq-v1 with the archive's spread pooled on half its degrees of freedom: an archive of n control "
            "starts counts (n - 1) / 2. Its spread is one estimate that every look shares, and the looks' levels "
            "were spent for a known spread; audited with archives estimated from their own starts, win2-seq-v1's "
            "false WIN reached 3.2 % at 15 % launch noise; this rule's stays within 2.5 % at every audited point. "
            "Everything else is win2-seq-v1's: looks after 3 (with at least 10 archived control starts), 5, 7 and "
            "9 starts, the same levels, bar, guards and stopping."
        ),
        "archive_df_share": 0.5,
    }
)

WIN_ARMS_V1 = RuleSpec(
    id="win-arms-v1",
    kind="arms",
    description=(
        "One control against 2 to 8 candidates in one window, win2's question for each: every round launches the "
        "control and every candidate still in play once, in an order drawn per round from a Williams design; after "
        "rounds 2, 3, 4 and 5 every open candidate is judged by one log-scale fit over every start of the window "
        "(level, drift, one effect per candidate; the launch variance pooled over every arm's launches and the "
        "archive's spread at half its degrees of freedom, never below the repeat variance over n). WIN beyond +2 % "
        "with the look's interval above 0, its level the family's one-sided 2.5 % split evenly over the candidates "
        "and spent over the looks (Lan-DeMets, Pocock's shape); LOSS beyond -2 % with the candidate's own 2.5 % "
        "spent the same way, or a guard's 99 % interval, split over the looks, wholly below -3 %; NO-CHANGE when "
        "the equivalence interval (each test 5 %, spent) lies within +-2 %; a candidate whose equivalence interval "
        "lies below +2 % cannot WIN. A settled candidate is not launched again; the window stops when every one "
        "is settled, and one still open after round 5 is NEUTRAL. Among the WINs, the best is named with its "
        "95 % interval over the next."
    ),
    **WIN2_QUESTION,
    guard_tolerance_pct=3.0,
    order="random",
    guard_confidence=0.99,
    rounds=(2, 3, 4, 5),
    # python tools/sequential_boundaries.py --rounds 2 3 4 5 --shape pocock --alpha 0.025 (LOSS, and with
    # --candidates 2 ... 8 each WIN line), --alpha 0.05 (each NO-CHANGE test)
    look_levels=(0.013078, 0.008957, 0.008765, 0.008837),
    equivalence_levels=(0.026157, 0.019370, 0.019433, 0.019931),
    win_levels={
        2: (0.006539, 0.004187, 0.004018, 0.003997),
        3: (0.004359, 0.002695, 0.002561, 0.002532),
        4: (0.003270, 0.001974, 0.001865, 0.001836),
        5: (0.002616, 0.001552, 0.001460, 0.001433),
        6: (0.002180, 0.001276, 0.001196, 0.001171),
        7: (0.001868, 0.001082, 0.001011, 0.000988),
        8: (0.001635, 0.000938, 0.000875, 0.000853),
    },
    spending=(
        "lan-demets pocock over rounds (information r / 5); one-sided 0.025 for the family's WIN split evenly over "
        "the candidates, 0.025 for each candidate's LOSS, 0.05 for each NO-CHANGE test"
    ),
    archive_df_share=0.5,
)

RULES: dict[str, RuleSpec] = {
    rule.id: rule
    for rule in (WIN2_V1, WIN2_LAUNCH_V1, WIN2_ALT7_V1, WIN2_ALT7_CLIENT_V1, WIN2_SEQ_V1, WIN2_SEQ_V2, WIN_ARMS_V1)
}
#: The rule a plan gets when it names none: the registered rule whose audited error rates hold at the noise
#: measured on shared machines, with an archive estimated from its own starts as a real one is, and which
#: stops as soon as a look decides.
DEFAULT_RULE = WIN2_SEQ_V2.id


def get_rule(rule_id: str | None) -> RuleSpec:
    """The registered rule ``rule_id``; None (a plan naming no rule) is the default rule."""
    if rule_id is None:
        return RULES[DEFAULT_RULE]
    try:
        return RULES[rule_id]
    except KeyError:
        raise InputError(f"no registered rule {rule_id!r}; registered: {', '.join(sorted(RULES))}") from None
