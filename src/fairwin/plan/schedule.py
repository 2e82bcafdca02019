"""The dry plan: which starts run in which order, and each cell's waves.

Pure functions of the plan. The same waves (seeds, prompt ids) run in every start,
which is what makes the starts comparable repeat by repeat.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fairwin.errors import PlanError
from fairwin.plan.diagnostics import GreedySettings
from fairwin.plan.loading import LoadedPlan, Prompt
from fairwin.plan.modes import REGISTERED_MODES, Mode
from fairwin.rows import BRACKET_STARTS, Kind, order_kinds, round_orders
from fairwin.rules.spec import RuleSpec


@dataclass(frozen=True)
class StartSpec:
    name: str  # s1, s2, ... in run order
    kind: Kind
    role: str
    round: int | None = None  # a many-arm window's round (1-based); None for a two-arm window


@dataclass(frozen=True)
class WaveSpec:
    cell: str
    index: int  # 0-based within the cell; seed = base_seed + index
    repeat: int  # 1-based
    family: str
    seed: int
    prompts: tuple[Prompt, ...]
    label: str | None = None  # an uncounted wave's own key (warm-up), so its salts differ from every counted wave's

    @property
    def key(self) -> str:
        return self.label or f"{self.cell}/r{self.repeat}/{self.family}"


def default_mode(loaded: LoadedPlan) -> str:
    """The mode a command runs without ``--mode``: ``controlled`` where the plan has it, else the plan's only mode."""
    modes = loaded.plan.all_modes()
    if "controlled" in modes or not modes:
        return "controlled"  # with no mode at all, resolve_mode names what to declare
    if len(modes) == 1:
        return next(iter(modes))
    raise PlanError(f"{loaded.path}: the plan has modes {', '.join(sorted(modes))}; name one with --mode")


def resolve_mode(loaded: LoadedPlan, mode_name: str) -> Mode:
    modes = loaded.plan.all_modes()
    if mode_name in modes:
        return modes[mode_name]
    if mode_name in REGISTERED_MODES:
        control, candidate = REGISTERED_MODES[mode_name]
        missing = [role for role in (control, candidate) if role not in loaded.plan.roles]
        declared = (
            f" or run one of the plan's modes ({', '.join(sorted(modes))}) with --mode"
            if modes
            else (f", or declare [modes.NAME] with control and candidate among roles {', '.join(loaded.plan.roles)}")
        )
        raise PlanError(
            f"{loaded.path}: mode {mode_name!r} needs role(s) {', '.join(missing)}, which the plan does not "
            f"declare; add [roles.{missing[0]}]{declared}"
        )
    known = ", ".join(sorted(modes)) or "(none)"
    raise PlanError(f"{loaded.path}: no mode {mode_name!r}; the plan's modes are: {known}")


def starts_for(mode: Mode, order: str = "control-first", count: int = BRACKET_STARTS) -> list[StartSpec]:
    """The window's starts: ``count`` of them (the rule's), kinds alternating from the one ``order`` names."""
    return [
        StartSpec(name=name, kind=kind, role=getattr(mode, kind)) for name, kind in order_kinds(order, count).items()
    ]


def arm_starts_for(mode: Mode, rounds: int, seed: int) -> list[StartSpec]:
    """A many-arm window's planned starts: every arm once a round, in the round's order drawn by ``seed`` (a
    Williams design, rows.round_orders). A candidate dropped at a look is skipped in the rounds after it, so
    the names of the starts that ran keep their run order with gaps where a dropped arm's turn was."""
    starts: list[StartSpec] = []
    for number, order in enumerate(round_orders(mode.roles, rounds, seed), 1):
        for role in order:
            kind: Kind = "control" if role == mode.control else "candidate"
            starts.append(StartSpec(name=f"s{len(starts) + 1}", kind=kind, role=role, round=number))
    return starts


def window_starts(mode: Mode, rule: RuleSpec, order: str = "control-first", seed: int = 0) -> list[StartSpec]:
    """The starts a window of ``mode`` plans under ``rule``: a many-arm rule's, every arm every round in the
    orders ``seed`` draws (any seed's costs the same); else as many as the rule registers, kinds alternating from
    the one ``order`` names."""
    if rule.rounds:
        return arm_starts_for(mode, rule.rounds[-1], seed)
    return starts_for(mode, order, rule.start_count)


def round_ends(starts: Sequence[StartSpec]) -> dict[int, int]:
    """Each round's last planned start, by its number in run order (1-based): where a many-arm window looks."""
    return {start.round: number for number, start in enumerate(starts, 1) if start.round is not None}


def prompts_sent(waves: Sequence[WaveSpec]) -> dict[tuple[str, str], Prompt]:
    """Each prompt these waves send, once: (family, prompt id) -> prompt (ids are unique within a family only)."""
    return {(wave.family, prompt.id): prompt for wave in waves for prompt in wave.prompts}


def waves_for(loaded: LoadedPlan, cell_name: str) -> list[WaveSpec]:
    """Repeats x families; repeat r takes the r-th slice of each family's frozen order."""
    plan = loaded.plan
    cell = plan.cells[cell_name]
    k = cell.streams_per_wave
    waves: list[WaveSpec] = []
    for repeat in range(1, plan.window.repeats + 1):
        for family_name in cell.families:
            ordered = loaded.families[family_name].ordered
            start = (repeat - 1) * k
            # A family shorter than repeats x streams wraps around; the dry plan shows the ids.
            chosen = tuple(ordered[(start + j) % len(ordered)] for j in range(k))
            index = len(waves)
            waves.append(
                WaveSpec(
                    cell=cell_name,
                    index=index,
                    repeat=repeat,
                    family=family_name,
                    seed=plan.window.base_seed + index,
                    prompts=chosen,
                )
            )
    return waves


def diagnosed_starts(settings: GreedySettings | None, mode: str, starts: Sequence[StartSpec]) -> set[str]:
    """The starts that run greedy diagnostics: the plan's kinds (by default the candidate, and in
    production-policy mode P's starts too), the first of each kind unless every start is asked for."""
    if settings is None:
        return set()
    kinds = settings.on or (["candidate", "control"] if mode == "production-policy" else ["candidate"])
    chosen = [s for s in starts if s.kind in kinds]
    if not settings.every_start:
        chosen = [s for s in chosen if s is next(o for o in chosen if o.kind == s.kind)]
    return {s.name for s in chosen}
