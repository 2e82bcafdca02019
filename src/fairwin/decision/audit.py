"""A rule's own error rates, by seeded Monte Carlo through the rule's real code.

Each trial draws a window: for every start a launch offset (relative s.d.
``launch_cv_pct``) and for every repeat its own noise (``repeat_cv_pct``),
independently for each metric the rule reads; the candidate's primary is scaled by
``1 + effect_pct / 100``. The trial is decided by :func:`decide_cell`, the same
function that decides real windows, so the audit cannot drift from the rule.

Under no change (effect 0) a WIN is a false WIN and a LOSS a false LOSS; at an
effect, the WIN rate is the rule's power. Pure: same inputs, same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import ConfigDict

from fairwin.decision.decide import decide_cell, window_verdict
from fairwin.decision.document import CellDecision
from fairwin.decision.inputs import ArchiveNoise, DecisionRow, WindowContext, archive_spreads
from fairwin.decision.sequential import judge_looks
from fairwin.formats import AUDIT, RecordFormat
from fairwin.records import Record
from fairwin.rows import order_kinds
from fairwin.rules.spec import RuleSpec

CELL = "audit"
LEVEL = 100.0

#: How a simulated archive's spread reaches the rule: estimated from its starts, as a real archive's is, or the
#: true spread (optimistic: it ignores that an archive of n starts knows its spread on n - 1 degrees of freedom).
ArchiveSpread = Literal["estimated", "true"]


class AuditResult(Record):
    """``fairwin.audit/1``: a rule's error rates, simulated at one noise and effect (``fairwin rules audit``)."""

    record_format: ClassVar[RecordFormat] = AUDIT
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["fairwin.audit/1"] = "fairwin.audit/1"
    rule_id: str
    rule_sha256: str
    repeats: int
    repeat_cv_pct: float
    launch_cv_pct: float
    effect_pct: float
    drift_pct: float = 0.0
    archive_starts: int = 0  # each simulated window's archive of control starts (0: none)
    archive_spread: ArchiveSpread = "estimated"  # how that archive's spread was given: estimated, or true
    trials: int
    seed: int
    rates: dict[str, float]  # verdict -> share of trials
    guard_failure_rates: dict[str, float]  # each guard's own failure share
    false_win: float | None  # when effect_pct == 0
    false_loss: float | None
    power: float | None  # WIN share when effect_pct != 0
    mc_error: float  # one standard error of a rate near 0.5: sqrt(0.25 / trials)
    # Starts the simulated windows ran before their verdict: a fixed rule's always; a sequential rule's vary.
    starts_mean: float | None = None
    starts_median: float | None = None
    starts_p90: float | None = None
    max_starts: int | None = None
    win_after: dict[int, float] | None = None  # starts -> share of the trials called WIN after exactly that many


def _rows(
    rng: np.random.Generator,
    rule: RuleSpec,
    repeats: int,
    repeat_cv: float,
    launch_cv: float,
    effect: float,
    order: str,
    drift: float,
) -> list[DecisionRow]:
    checklist = {rule.checklist_primary} if rule.checklist_primary else set()
    metrics = sorted({rule.primary, *rule.guards, *rule.reported} | checklist)
    kinds = order_kinds(order, rule.start_count)
    rows = []
    launch = {(s, m): rng.normal(0.0, launch_cv / 100.0) for s in kinds for m in metrics}
    for position, start in enumerate(kinds):
        for repeat in range(1, repeats + 1):
            values: dict[str, Any] = {}
            for metric in metrics:
                noise = 1.0 + launch[(start, metric)] + rng.normal(0.0, repeat_cv / 100.0)
                value = LEVEL * (1.0 + drift / 100.0) ** position * noise
                if kinds[start] == "candidate" and metric == rule.primary:
                    value *= 1.0 + effect / 100.0
                values[metric] = value
            # model_construct: the values are made here, not read from a user; validation would only cost time.
            rows.append(
                DecisionRow.model_construct(
                    start=start,
                    kind=kinds[start],
                    cell=CELL,
                    repeat=repeat,
                    clock_cap_mhz=None,
                    thermal_events=None,
                    **values,
                )
            )
    return rows


def _noise(metric: str, starts: int, spreads: tuple[float | None, float | None, float | None]) -> ArchiveNoise:
    """One metric's archive of ``starts`` control starts, with its (launch cv, repeat cv, range) in %."""
    launch, repeat, spread = spreads
    return ArchiveNoise(
        metric=metric,
        cell=CELL,
        starts=starts,
        windows=starts,
        launch_cv_pct=launch,
        repeat_cv_pct=repeat,
        range_pct=spread,
    )


def draw_archive(
    rng: np.random.Generator, rule: RuleSpec, starts: int, repeat_cv: float, launch_cv: float, repeats: int
) -> list[ArchiveNoise]:
    """An archive of ``starts`` control starts, drawn at the point's noise for the primary and each guard, and
    estimated as a real archive is (:func:`archive_spreads`): the spread of its starts' means on starts - 1
    degrees of freedom, which a window then pools as an estimate, never the true spread."""
    if starts <= 1:
        return []
    found = []
    for metric in (rule.primary, *rule.guards):
        launches = rng.normal(0.0, launch_cv / 100.0, size=(starts, 1))
        values = LEVEL * (1.0 + launches + rng.normal(0.0, repeat_cv / 100.0, size=(starts, repeats)))
        means = values.mean(axis=1)
        deviations = (values - means[:, None]).ravel().tolist()
        found.append(_noise(metric, starts, archive_spreads(means, deviations, starts * (repeats - 1))))
    return found


def _true_archive(rule: RuleSpec, starts: int, repeat_cv: float, launch_cv: float, repeats: int) -> list[ArchiveNoise]:
    """The same archive given its true spread (launch^2 + repeat^2 / repeats): the audit before 2026-12-03, kept
    to show how much an estimated spread costs."""
    if starts <= 1:
        return []
    spread = math.sqrt(launch_cv**2 + repeat_cv**2 / repeats)
    return [_noise(m, starts, (spread, repeat_cv, None)) for m in (rule.primary, *rule.guards)]


@dataclass(frozen=True)
class _TrialNoise:
    """What each trial draws its window from."""

    repeats: int
    repeat_cv_pct: float
    launch_cv_pct: float
    effect_pct: float
    drift_pct: float
    archive_starts: int


def _trial(
    rng: np.random.Generator,
    rule: RuleSpec,
    deciding: RuleSpec,
    noise: _TrialNoise,
    archive: list[ArchiveNoise] | None,
) -> tuple[CellDecision, int]:
    """One simulated window decided as a window is: its cell's decision and the starts it used. ``archive``: the
    archive given its true spread, else one is drawn and estimated for this trial."""
    order = "control-first" if rule.order == "control-first" or rng.random() < 0.5 else "candidate-first"
    if archive is None:
        archive = draw_archive(rng, rule, noise.archive_starts, noise.repeat_cv_pct, noise.launch_cv_pct, noise.repeats)
    context = WindowContext(window_id="audit", mode="audit", cells=[CELL], order=order, archive=archive)
    rows = _rows(
        rng, rule, noise.repeats, noise.repeat_cv_pct, noise.launch_cv_pct, noise.effect_pct, order, noise.drift_pct
    )
    if rule.kind == "sequential":
        # The same stopping code a window runs; the rows of starts after the stopping look go unread.
        (decision,), stopping = judge_looks(rows, deciding, context, decide_cell, window_verdict)
        return decision, stopping.looks[-1].after
    return decide_cell(rows, CELL, deciding, context), rule.start_count


@dataclass
class _Tally:
    """The trials so far: each verdict's count, each guard's failures, the starts each used, WINs by starts."""

    guard_fails: dict[str, int]
    counts: dict[str, int] = field(default_factory=dict)
    used: list[int] = field(default_factory=list)
    wins: dict[int, int] = field(default_factory=dict)

    def add(self, decision: CellDecision, starts: int) -> None:
        self.used.append(starts)
        self.counts[decision.verdict] = self.counts.get(decision.verdict, 0) + 1
        if decision.verdict == "WIN":
            self.wins[starts] = self.wins.get(starts, 0) + 1
        for guard in decision.guards:
            if guard.failed:
                self.guard_fails[guard.metric] += 1


def audit(
    rule: RuleSpec,
    *,
    repeats: int = 3,
    repeat_cv_pct: float,
    launch_cv_pct: float = 0.0,
    effect_pct: float = 0.0,
    trials: int = 2000,
    seed: int = 0,
    archive_starts: int = 0,
    drift_pct: float = 0.0,
    archive_spread: ArchiveSpread = "estimated",
    on_trial: Callable[[], None] | None = None,
) -> AuditResult:
    """``archive_starts`` > 1 lets a launch-aware rule use an archive of that many control starts at the point's
    noise: each window's own, drawn and estimated as a real archive is (``archive_spread = "estimated"``), or
    given the true spread (``"true"``, optimistic: how the audit ran before 2026-12-03).

    ``drift_pct`` moves every metric's level by that many % from one start to the next (the slow fall
    measured on shared machines), compounding, with the launch and repeat noise relative to that level.
    ``on_trial`` is called after each trial (a progress bar's advance; the audit itself does no I/O).
    """
    rng = np.random.default_rng(seed)
    true_archive = _true_archive(rule, archive_starts, repeat_cv_pct, launch_cv_pct, repeats)
    tally = _Tally(dict.fromkeys(rule.guards, 0))
    # A cell's verdict reads only the primary, the guards and validity: reported metrics and the
    # checklist's literal primary are left undecided here (half of every trial's intervals). The rows
    # still carry them, so the random draws, and so every audited rate, are those of the whole rule.
    deciding = rule.model_copy(update={"reported": (), "checklist_primary": None})
    noise = _TrialNoise(repeats, repeat_cv_pct, launch_cv_pct, effect_pct, drift_pct, archive_starts)
    for _ in range(trials):
        tally.add(*_trial(rng, rule, deciding, noise, true_archive if archive_spread == "true" else None))
        if on_trial is not None:
            on_trial()
    rates = {verdict: n / trials for verdict, n in sorted(tally.counts.items())}
    null = effect_pct == 0
    return AuditResult(
        rule_id=rule.id,
        rule_sha256=rule.sha256,
        repeats=repeats,
        repeat_cv_pct=repeat_cv_pct,
        launch_cv_pct=launch_cv_pct,
        effect_pct=effect_pct,
        drift_pct=drift_pct,
        archive_starts=archive_starts if archive_starts > 1 else 0,
        archive_spread=archive_spread,
        trials=trials,
        seed=seed,
        rates=rates,
        guard_failure_rates={g: n / trials for g, n in tally.guard_fails.items()},
        false_win=rates.get("WIN", 0.0) if null else None,
        false_loss=rates.get("LOSS", 0.0) if null else None,
        power=None if null else rates.get("WIN", 0.0),
        mc_error=math.sqrt(0.25 / trials),
        starts_mean=float(np.mean(tally.used)),
        starts_median=float(np.median(tally.used)),
        starts_p90=float(np.percentile(tally.used, 90)),
        max_starts=rule.start_count,
        win_after={k: n / trials for k, n in sorted(tally.wins.items())},
    )
