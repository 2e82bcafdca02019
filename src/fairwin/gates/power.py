"""Power before running: can this window detect the bar at all, given the archive's noise?

The interval's half-width is t x SE, with the SE and degrees of freedom the rule's own
procedure gives at the archive's noise (``planned_error``: within-launch repeats for
win2-v1, the launch-to-launch spread for the launch-aware rules). When the half-width
exceeds the bar, an effect at the bar can never be significant, and the window would
be spent for nothing: the user is warned before anything starts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from fairwin.decision import ArchiveNoise, RuleSpec, audit, procedure_for
from fairwin.decision.arms import arms_planned_error
from fairwin.decision.paired import t_quantile
from fairwin.errors import InputError

POWER = 0.8
#: What a rule should hold at the archive's noise: false WIN and false LOSS in windows where nothing changed.
FALSE_WIN_TARGET, FALSE_LOSS_TARGET = 0.025, 0.05
AUDIT_TRIALS, AUDIT_SEED = 1000, 0
#: Fewer simulated windows (at least 100) where nobody reads the rates closely: the test suite sets it, since
#: 1,000 trials cost one to two seconds a window. Every statement of the rates names its trials and Monte
#: Carlo error, so a smaller audit is never passed off as a larger one.
AUDIT_TRIALS_ENV = "FAIRWIN_AUDIT_TRIALS"
MIN_AUDIT_TRIALS = 100


def audit_trials() -> int:
    """The trials of a window's audits (the gate's warnings, the summary's rates): $FAIRWIN_AUDIT_TRIALS, else 1000."""
    value = os.environ.get(AUDIT_TRIALS_ENV, "").strip()
    if not value:
        return AUDIT_TRIALS
    if not value.isdigit() or int(value) < MIN_AUDIT_TRIALS:
        raise InputError(
            f"{AUDIT_TRIALS_ENV}={value!r} is not a whole number of at least {MIN_AUDIT_TRIALS}; "
            f"unset it for the default {AUDIT_TRIALS}"
        )
    return int(value)


@dataclass(frozen=True)
class Detectability:
    cell: str
    se_pct: float
    df: float
    half_width_pct: float
    mde_pct: float  # the true effect WON about 80 % of the time
    source: str

    def warning(self, bar_pct: float) -> str | None:
        if self.half_width_pct <= bar_pct:
            return None
        return (
            f"cell {self.cell}: with {self.source}, the interval is about +-{self.half_width_pct:.2f} %, "
            f"wider than the {bar_pct:g} % bar, so an effect at the bar cannot be detected; "
            f"the smallest effect this window detects {POWER:.0%} of the time is about {self.mde_pct:.2f} %"
        )


def detectability(rule: RuleSpec, cell: str, repeats: int, noise: ArchiveNoise | None) -> Detectability | None:
    planned = arms_planned_error(rule, noise) if rule.rounds else procedure_for(rule, {}).planned_error(noise, repeats)
    if planned is None:
        return None
    se, df, source = planned.se_pct, planned.df, planned.source
    half = t_quantile(0.5 + rule.confidence / 2.0, df) * se
    mde = max(rule.bar_pct, half) + t_quantile(POWER, df) * se
    return Detectability(cell=cell, se_pct=se, df=df, half_width_pct=half, mde_pct=mde, source=source)


def power_warnings(rule: RuleSpec, repeats: int, noise: list[ArchiveNoise], cells: list[str]) -> list[str]:
    warnings = []
    for cell in cells:
        mine = next((n for n in noise if n.cell == cell and n.metric == rule.primary), None)
        if rule.kind == "launch" and (mine is None or mine.launch_cv_pct is None):
            warnings.append(
                f"cell {cell}: no archived control starts, so {rule.id} has 1 degree of freedom (t = 12.7) and can "
                "only decide very large effects; A/A windows fill the archive"
            )
            continue
        found = detectability(rule, cell, repeats, mine)
        message = found.warning(rule.bar_pct) if found else None
        if message:
            warnings.append(message)
    return warnings


def error_rate_warnings(rule: RuleSpec, repeats: int, noise: list[ArchiveNoise], cells: list[str]) -> list[str]:
    """The rule's audited error rates at the archive's noise, for each deciding cell where they miss the targets.

    Runs the rule's real code on simulated no-change windows (``fairwin rules audit``); a
    rate counts as missed when it exceeds its target by more than two Monte Carlo errors.
    """
    warnings: list[str] = []
    if rule.rounds:  # a many-arm rule's audit is its own (benchmarks/many_arms.py), over every count of candidates
        return warnings
    trials = audit_trials()
    for cell in cells:
        mine = next((n for n in noise if n.cell == cell and n.metric == rule.primary), None)
        if mine is None or mine.repeat_cv_pct is None or mine.launch_cv_pct is None:
            continue
        found = audit(
            rule,
            repeats=repeats,
            repeat_cv_pct=max(mine.repeat_cv_pct, 1e-6),
            launch_cv_pct=mine.launch_cv_pct,
            trials=trials,
            seed=AUDIT_SEED,
            archive_starts=mine.starts,
        )
        false_win, false_loss, margin = found.false_win or 0.0, found.false_loss or 0.0, 2 * found.mc_error
        if false_win > FALSE_WIN_TARGET + margin or false_loss > FALSE_LOSS_TARGET + margin:
            warnings.append(
                f"cell {cell}: at the archive's noise (repeat cv {mine.repeat_cv_pct:.2f} %, launch cv "
                f"{mine.launch_cv_pct:.2f} % over {mine.starts} control starts) {rule.id} calls a no-change window "
                f"WIN {100 * false_win:.1f} % and LOSS {100 * false_loss:.1f} % of the time (targets: at most "
                f"{100 * FALSE_WIN_TARGET:g} % and {100 * FALSE_LOSS_TARGET:g} %; {trials} simulated windows); "
                f"compare the registered rules: `fairwin rules audit RULE --noise-from ARCHIVE --cell {cell}`"
            )
    return warnings


def expected_starts(rule: RuleSpec, repeats: int, noise: list[ArchiveNoise], cells: list[str]) -> float | None:
    """The mean starts a window of a sequential rule runs when nothing changed, at the archive's noise (the
    noisiest deciding cell's), by the rule's audit; None when the archive does not say or the rule is fixed."""
    if not rule.looks:
        return None
    known = [
        n
        for n in noise
        if n.cell in cells and n.metric == rule.primary and n.repeat_cv_pct is not None and n.launch_cv_pct is not None
    ]
    if len(known) < len(cells) or not known:
        return None
    worst = max(known, key=lambda n: (n.launch_cv_pct or 0.0, n.repeat_cv_pct or 0.0))
    found = audit(
        rule,
        repeats=repeats,
        repeat_cv_pct=max(worst.repeat_cv_pct or 0.0, 1e-6),
        launch_cv_pct=worst.launch_cv_pct or 0.0,
        trials=audit_trials(),
        seed=AUDIT_SEED,
        archive_starts=min(n.starts for n in known),
    )
    return found.starts_mean
