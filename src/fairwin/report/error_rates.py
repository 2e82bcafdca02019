"""The rule's own error rates at the window's noise, shown next to its verdict.

A user deserves to know that a guard can fail by chance: of win2-v1's two guards,
judged on three exchangeable repeats, at least one fails about 45 % of the time when
nothing changed. The audit runs the rule's real code on simulated windows with the
noise this window (and the archive) showed.
"""

from __future__ import annotations

import math

from fairwin.decision import AuditResult, Decision, audit
from fairwin.decision.arms_audit import ArmsNoise, ArmsTally, arms_audit
from fairwin.gates.power import AUDIT_SEED, audit_trials


def window_noise(decision: Decision) -> tuple[float, float, int] | None:
    """(repeat cv %, launch cv %, repeats) for the first deciding cell that has an estimate."""
    for cell in decision.cells:
        estimate = cell.primary.estimate if cell.primary else None
        if not cell.decides or estimate is None or estimate.n < 2:
            continue
        archive = cell.noise.archive if cell.noise else None
        if archive is not None and archive.repeat_cv_pct is not None:
            repeat_cv = archive.repeat_cv_pct
        elif cell.noise is not None and cell.noise.off_off_spread_pct:
            # Two controls of one repeat differ by x1 - x3, whose variance is twice one value's.
            spread = cell.noise.off_off_spread_pct
            repeat_cv = math.sqrt(sum(s * s for s in spread) / len(spread) / 2.0)
        else:
            continue
        if archive is not None and archive.launch_cv_pct is not None:
            launch_cv = archive.launch_cv_pct
        else:  # a launch-aware rule's own estimate from this window's starts; none for win2-v1
            launch_cv = estimate.launch_cv_pct or 0.0
        return max(repeat_cv, 1e-6), launch_cv, estimate.n
    return None


def audited_rates(decision: Decision) -> str:
    noise = window_noise(decision)
    if noise is None:
        return f"{decision.rule_id}'s error rates: not audited (no decision cell has an estimate)"
    repeat_cv, launch_cv, repeats = noise
    trials = audit_trials()
    if decision.arms is not None:
        return _arms_rates(decision, noise, trials)
    key = (decision.rule_sha256, repeat_cv, launch_cv, repeats, trials)
    if key not in _AUDITED:  # a window states its rates twice (summary.md, report.html): one audit of ~2 s
        _AUDITED[key] = audit(
            decision.rule,
            repeats=repeats,
            repeat_cv_pct=repeat_cv,
            launch_cv_pct=launch_cv,
            trials=trials,
            seed=AUDIT_SEED,
            archive_starts=0,
        )
    result = _AUDITED[key]
    return (
        f"{decision.rule_id}'s own error rates at this window's noise (repeat cv {repeat_cv:.2f} %, launch cv "
        f"{launch_cv:.2f} %, {repeats} repeats; {trials} simulated no-change windows, seed {AUDIT_SEED}): "
        f"false LOSS {100 * (result.false_loss or 0):.1f} %, false WIN {100 * (result.false_win or 0):.1f} % "
        f"(Monte Carlo error about {100 * result.mc_error:.1f} points)"
    )


# The audit is seeded, so the same rule at the same noise always gives the same rates.
_AUDITED: dict[tuple[str, float, float, int, int], AuditResult] = {}


_ARMS_AUDITED: dict[tuple[str, int, float, float, int, int], ArmsTally] = {}


def _arms_rates(decision: Decision, noise: tuple[float, float, int], trials: int) -> str:
    """A many-arm window's: the family's false WIN (any unchanged candidate called WIN) and the highest false LOSS
    of one candidate, simulated with as many candidates as the window had."""
    assert decision.arms is not None
    repeat_cv, launch_cv, repeats = noise
    count = len(decision.arms.candidates)
    key = (decision.rule_sha256, count, repeat_cv, launch_cv, repeats, trials)
    if key not in _ARMS_AUDITED:
        unchanged = ArmsNoise((0.0,) * count, repeat_cv, launch_cv, repeats=repeats)
        _ARMS_AUDITED[key] = arms_audit(decision.rule, unchanged, trials=trials, seed=AUDIT_SEED)
    found = _ARMS_AUDITED[key]
    return (
        f"{decision.rule_id}'s own error rates at this window's noise (repeat cv {repeat_cv:.2f} %, launch cv "
        f"{launch_cv:.2f} %, {repeats} repeats; {trials} simulated no-change windows of {count} candidates, seed "
        f"{AUDIT_SEED}): the family's false WIN {100 * found.family_false_win / found.trials:.1f} %, a candidate's "
        f"false LOSS at most {100 * found.false_loss:.1f} % (Monte Carlo error about "
        f"{100 * math.sqrt(0.25 / trials):.1f} points)"
    )
