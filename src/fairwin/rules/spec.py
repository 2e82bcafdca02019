"""Decision rules as data: a rule's parameters and its sha256 (the registered ones: registry.py).

A rule is data: its id and every parameter. Its sha256 is taken over the canonical
JSON of that data, so a decision records exactly which rule decided it, and changing
any parameter means registering a new id: the bar is never moved silently.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fairwin.files import canonical_json, sha256_bytes
from fairwin.rows import BRACKET_STARTS, LOWER_IS_BETTER, METRICS, metric_source

#: Parameters added after the first rules were registered. Left unset they stay out of a
#: rule's canonical JSON, so every rule registered before them keeps its sha256.
ADDED_PARAMETERS = (
    "starts",
    "guard_confidence",
    "looks",
    "look_levels",
    "equivalence_levels",
    "spending",
    "first_look_archive_starts",
    "archive_df_share",
    "rounds",
    "win_levels",
)


class RuleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    kind: Literal["win2", "launch", "alternating", "sequential", "arms"] = Field(
        description="The decision procedure the parameters feed."
    )
    description: str
    primary: str = Field(description="Pooled-row field the verdict is decided on.")
    guards: tuple[str, ...] = Field(description="Higher-is-better fields that can only cause LOSS.")
    reported: tuple[str, ...] = Field(description="Fields given their own verdict, never deciding.")
    checklist_primary: str | None = Field(description="The alternative primary recorded as checklist_literal.")
    lower_is_better: tuple[str, ...] = LOWER_IS_BETTER
    bar_pct: float = Field(description="WIN needs point > +bar, LOSS point < -bar.")
    confidence: float = Field(description="Two-sided interval level for WIN and LOSS.")
    guard_fail_repeats: int | None = Field(
        None, ge=1, description="win2: a guard fails when the candidate is below both controls in this many repeats."
    )
    guard_tolerance_pct: float | None = Field(
        None, description="launch: a guard fails when its whole interval lies below -tolerance."
    )
    equivalence_confidence: float | None = Field(
        None, description="launch: NO-CHANGE when this interval lies within +-bar (two one-sided tests)."
    )
    order: Literal["control-first", "random"] = Field(
        description="control-first: s1 is a control; random: the first start's kind is drawn per window."
    )
    starts: int | None = Field(
        None, ge=3, le=99, description="Starts per window, kinds alternating (unset: 3, the bracket)."
    )
    guard_confidence: float | None = Field(
        None, gt=0, lt=1, description="alternating: the level of a guard's interval (unset: confidence)."
    )
    looks: tuple[int, ...] | None = Field(
        None, description="sequential: the starts after which the window decides or goes on; the last is its maximum."
    )
    look_levels: tuple[float, ...] | None = Field(
        None, description="sequential: each look's nominal one-sided level for WIN and for LOSS (the spent alpha)."
    )
    equivalence_levels: tuple[float, ...] | None = Field(
        None, description="sequential: each look's nominal one-sided level of the two tests for NO-CHANGE."
    )
    spending: str | None = Field(None, description="sequential: the spending function the levels come from.")
    first_look_archive_starts: int | None = Field(
        None, ge=2, description="sequential: the first look is taken only with at least this many archived starts."
    )
    archive_df_share: float | None = Field(
        None,
        gt=0,
        le=1,
        description=(
            "launch-aware: the share of an archive's starts - 1 degrees of freedom its launch spread is pooled "
            "on (unset: all of them)."
        ),
    )

    rounds: tuple[int, ...] | None = Field(
        None,
        description="arms: the rounds (one launch of every arm in play) after which the window decides or goes on; "
        "the last is its maximum.",
    )
    win_levels: dict[int, tuple[float, ...]] | None = Field(
        None,
        description="arms: per number of candidates, each look's nominal one-sided level for one candidate's WIN "
        "(the family's alpha split over the candidates and spent over the looks).",
    )

    @model_validator(mode="after")
    def _parameters_fit_the_kind(self) -> RuleSpec:
        """Each kind's procedure reads its own parameters: a rule missing one, or carrying another
        kind's, cannot register (a win2 rule without guard_fail_repeats once failed every guard)."""
        sequential = ("looks", "look_levels", "equivalence_levels", "spending", "first_look_archive_starts")
        arms = ("rounds", "win_levels")
        needs = {
            "win2": ("guard_fail_repeats",),
            "launch": ("guard_tolerance_pct",),
            "alternating": ("guard_tolerance_pct", "starts"),
            "sequential": ("guard_tolerance_pct", "equivalence_confidence", *sequential),
            "arms": ("guard_tolerance_pct", "look_levels", "equivalence_levels", "spending", *arms),
        }[self.kind]
        foreign = {
            "win2": (
                "guard_tolerance_pct",
                "equivalence_confidence",
                "guard_confidence",
                "starts",
                "archive_df_share",
                *sequential,
                *arms,
            ),
            "launch": ("guard_fail_repeats", "guard_confidence", "starts", *sequential, *arms),
            "alternating": ("guard_fail_repeats", *sequential, *arms),
            "sequential": ("guard_fail_repeats", "starts", *arms),
            "arms": ("guard_fail_repeats", "starts", "looks", "first_look_archive_starts"),
        }[self.kind]
        missing = [name for name in needs if getattr(self, name) is None]
        if missing:
            raise ValueError(f"a rule of kind {self.kind} needs {', '.join(missing)}")
        stray = [name for name in foreign if getattr(self, name) is not None]
        if stray:
            raise ValueError(f"{', '.join(stray)} mean nothing to a rule of kind {self.kind}")
        if self.kind == "alternating" and (self.start_count < 5 or self.start_count % 2 == 0):
            raise ValueError("an alternating rule needs an odd number of starts, at least 5")
        if self.kind == "sequential":
            self._looks_fit()
        if self.kind == "arms":
            self._rounds_fit()
        unknown = [m for m in self.metrics if m not in METRICS]
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: not a pooled-row metric ({', '.join(METRICS)})")
        return self

    def _looks_fit(self) -> None:
        looks, levels, equivalence = self.looks or (), self.look_levels or (), self.equivalence_levels or ()
        if len(looks) < 2 or list(looks) != sorted(set(looks)) or looks[0] < 3 or any(k % 2 == 0 for k in looks):
            raise ValueError("a sequential rule's looks are two or more odd numbers of starts, rising, from 3")
        if len(levels) != len(looks) or len(equivalence) != len(looks):
            raise ValueError("a sequential rule needs one look level and one equivalence level per look")
        if not all(0 < level < 0.5 for level in (*levels, *equivalence)):
            raise ValueError("a look's level is a one-sided tail probability, between 0 and 0.5")

    def _rounds_fit(self) -> None:
        rounds, levels = self.rounds or (), self.win_levels or {}
        if len(rounds) < 2 or list(rounds) != sorted(set(rounds)) or rounds[0] < 2:
            raise ValueError("a many-arm rule's looks are two or more rounds, rising, from 2")
        if len(self.look_levels or ()) != len(rounds) or len(self.equivalence_levels or ()) != len(rounds):
            raise ValueError("a many-arm rule needs one LOSS level and one equivalence level per look")
        if not levels or min(levels) < 2 or any(len(found) != len(rounds) for found in levels.values()):
            raise ValueError("a many-arm rule registers one WIN level per look for each number of candidates, from 2")
        every = (*(self.look_levels or ()), *(self.equivalence_levels or ()), *(x for f in levels.values() for x in f))
        if not all(0 < level < 0.5 for level in every):
            raise ValueError("a look's level is a one-sided tail probability, between 0 and 0.5")

    @property
    def candidates_allowed(self) -> tuple[int, int]:
        """(fewest, most) candidates a window of this rule may hold: (1, 1) for every two-arm rule."""
        if not self.win_levels:
            return 1, 1
        return min(self.win_levels), max(self.win_levels)

    def arm_starts(self, candidates: int) -> int:
        """The starts a window of this rule runs at most with ``candidates`` candidates (every arm every round)."""
        if not self.rounds:
            return self.start_count
        return self.rounds[-1] * (candidates + 1)

    @property
    def start_count(self) -> int:
        """The starts a two-arm window of this rule runs at most (a sequential rule's last look); a many-arm rule's
        rounds, each of at least one control and two candidates (``arm_starts`` counts its candidates)."""
        if self.rounds:
            return self.rounds[-1] * 3
        if self.looks:
            return self.looks[-1]
        return self.starts or BRACKET_STARTS

    def first_look(self, archive_starts: int) -> int:
        """The starts before a window of this rule may first stop, given the fewest archived control starts
        among its deciding cells (for a fixed rule: all of them)."""
        if not self.looks:
            return self.start_count
        ready = self.first_look_archive_starts is not None and archive_starts >= self.first_look_archive_starts
        return self.looks[0] if ready else self.looks[1]

    def looks_taken(self, archive_starts: int) -> tuple[int, ...]:
        """The looks a window takes: every registered one from its first."""
        first = self.first_look(archive_starts)
        return tuple(k for k in (self.looks or (self.start_count,)) if k >= first)

    def starts_text(self) -> str:
        """The starts in words: 'fixed 7', or 'looks 3*, 5, 7, 9' (* only with enough archived control starts)."""
        if self.rounds:
            return "looks after rounds " + ", ".join(str(r) for r in self.rounds) + " (every arm in play once a round)"
        if not self.looks:
            return f"fixed {self.start_count}"
        return "looks " + ", ".join(f"{k}*" if i == 0 else str(k) for i, k in enumerate(self.looks))

    @property
    def sha256(self) -> str:
        data = self.model_dump(mode="json")
        for name in ADDED_PARAMETERS:
            if data[name] is None:
                del data[name]
        return sha256_bytes(canonical_json(data).encode("utf-8"))

    def higher_is_better(self, metric: str) -> bool:
        return metric not in self.lower_is_better

    @property
    def metrics(self) -> tuple[str, ...]:
        """Every metric the rule reads: primary, guards, reported and the checklist's."""
        checklist = (self.checklist_primary,) if self.checklist_primary else ()
        return tuple(dict.fromkeys((self.primary, *self.guards, *self.reported, *checklist)))

    @property
    def server_metrics(self) -> tuple[str, ...]:
        """The metrics it reads that only a server's counters give."""
        return tuple(m for m in self.metrics if metric_source(m) == "server")
