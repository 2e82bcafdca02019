"""A many-arm rule's own error rates, by seeded Monte Carlo through its real stopping code.

Each trial runs a window as a window runs: round by round, the control and every candidate still
in play launched once in the round's drawn order (rows.round_orders), each start a launch offset
(relative s.d. ``launch_cv_pct``) and each repeat its own noise (``repeat_cv_pct``), independently
for each metric the rule decides on, every level moved by ``drift_pct`` a start. After each round
the rule looks at, :func:`run_rounds` (what a window's looks and its decide step run) says who is
still in play; the next round launches only them. A true candidate's primary is scaled by
``1 + effect_pct / 100``. Each window's archive is drawn and estimated as a real one is.

Pure: same inputs, same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fairwin.decision.arms import arrange_arms
from fairwin.decision.arms_rounds import Rounds, run_rounds
from fairwin.decision.audit import CELL, LEVEL, draw_archive
from fairwin.decision.inputs import DecisionRow, WindowContext
from fairwin.rows import round_orders
from fairwin.rules.spec import RuleSpec

CONTROL = "control"


@dataclass(frozen=True)
class ArmsNoise:
    """What each trial draws its window from; ``effects``: each candidate's true effect in % (0: unchanged)."""

    effects: tuple[float, ...]
    repeat_cv_pct: float
    launch_cv_pct: float
    drift_pct: float = 0.0
    archive_starts: int = 0
    repeats: int = 3

    @property
    def candidates(self) -> tuple[str, ...]:
        return tuple(f"c{number}" for number in range(1, len(self.effects) + 1))


@dataclass
class ArmsTally:
    """The trials so far: each candidate's verdict counts, trials with a false WIN, and the starts each used."""

    noise: ArmsNoise
    trials: int = 0
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # candidate -> verdict -> trials
    family_false_win: int = 0  # trials where an unchanged candidate was called WIN
    starts: list[int] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)

    def add(self, found: Rounds) -> None:
        self.trials += 1
        self.starts.append(found.starts_run)
        self.rounds.append(found.rounds_run)
        false_win = False
        for candidate, effect in zip(self.noise.candidates, self.noise.effects, strict=True):
            state = found.state(candidate)
            verdict = "NEUTRAL" if state == "OPEN" else state
            self.counts.setdefault(candidate, {})
            self.counts[candidate][verdict] = self.counts[candidate].get(verdict, 0) + 1
            false_win |= effect == 0 and verdict == "WIN"
        self.family_false_win += false_win

    def rate(self, candidate: str, verdict: str) -> float:
        return self.counts.get(candidate, {}).get(verdict, 0) / max(self.trials, 1)

    @property
    def false_loss(self) -> float:
        """The highest false LOSS rate of any unchanged candidate (0 when every one is changed)."""
        nulls = [c for c, e in zip(self.noise.candidates, self.noise.effects, strict=True) if e == 0]
        return max((self.rate(c, "LOSS") for c in nulls), default=0.0)

    @property
    def power(self) -> float | None:
        """The mean WIN rate of the changed candidates (None: every one is unchanged)."""
        changed = [c for c, e in zip(self.noise.candidates, self.noise.effects, strict=True) if e != 0]
        return float(np.mean([self.rate(c, "WIN") for c in changed])) if changed else None


def _round_rows(
    rng: np.random.Generator, rule: RuleSpec, noise: ArmsNoise, order: Sequence[str], first: int
) -> list[DecisionRow]:
    """One round's rows: ``order``'s arms launched in turn from start number ``first`` + 1."""
    metrics = (rule.primary, *rule.guards)
    effects = dict(zip(noise.candidates, noise.effects, strict=True))
    rows = []
    for offset, arm in enumerate(order):
        position = first + offset
        launch = rng.normal(0.0, noise.launch_cv_pct / 100.0, size=len(metrics))
        level = LEVEL * (1.0 + noise.drift_pct / 100.0) ** position
        for repeat in range(1, noise.repeats + 1):
            values: dict[str, Any] = {}
            for number, metric in enumerate(metrics):
                value = level * (1.0 + launch[number] + rng.normal(0.0, noise.repeat_cv_pct / 100.0))
                if metric == rule.primary and arm != CONTROL:
                    value *= 1.0 + effects[arm] / 100.0
                values[metric] = value
            # model_construct: the values are made here, not read from a user; validation would only cost time.
            rows.append(
                DecisionRow.model_construct(
                    start=f"s{position + 1}",
                    kind="control" if arm == CONTROL else "candidate",
                    role=arm,
                    cell=CELL,
                    repeat=repeat,
                    clock_cap_mhz=None,
                    thermal_events=None,
                    **values,
                )
            )
    return rows


def arms_trial(rng: np.random.Generator, rule: RuleSpec, noise: ArmsNoise) -> Rounds:
    """One simulated many-arm window, looked at after each round as a window is."""
    return simulated_window(rng, rule, noise)[0]


def simulated_window(
    rng: np.random.Generator, rule: RuleSpec, noise: ArmsNoise
) -> tuple[Rounds, list[DecisionRow], WindowContext]:
    """One simulated many-arm window: its rounds as its last look saw them, its rows and its context."""
    assert rule.rounds
    archive = draw_archive(rng, rule, noise.archive_starts, noise.repeat_cv_pct, noise.launch_cv_pct, noise.repeats)
    context = WindowContext(window_id="audit", mode="audit", cells=[CELL], archive=archive)
    orders = round_orders((CONTROL, *noise.candidates), rule.rounds[-1], int(rng.integers(2**31)))
    rows: list[DecisionRow] = []
    in_play = set(noise.candidates)
    found = Rounds(noise.candidates)
    for number, order in enumerate(orders, 1):
        rows += _round_rows(
            rng, rule, noise, [arm for arm in order if arm in in_play or arm == CONTROL], len(rows) // noise.repeats
        )
        if number in rule.rounds:
            found = run_rounds({CELL: arrange_arms(rows, CELL)}, rule, context, noise.candidates)
            in_play = {c for c in noise.candidates if found.state(c) == "OPEN"}
            if not in_play:
                break
    return found, rows, context.model_copy(update={"candidates": list(noise.candidates)})


def arms_audit(
    rule: RuleSpec, noise: ArmsNoise, *, trials: int, seed: int, on_trial: Callable[[], None] | None = None
) -> ArmsTally:
    """``trials`` simulated windows at ``noise``; ``on_trial`` is called after each (a progress bar's advance)."""
    rng = np.random.default_rng(seed)
    tally = ArmsTally(noise)
    for _ in range(trials):
        tally.add(arms_trial(rng, rule, noise))
        if on_trial is not None:
            on_trial()
    return tally


def mc_error(trials: int) -> float:
    """One standard error of a rate near 0.5."""
    return math.sqrt(0.25 / max(trials, 1))
