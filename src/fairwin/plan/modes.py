"""A mode: which roles a window of it launches, and the rule that decides it.

A two-arm mode brackets its candidate with the control (A/A is allowed: it measures noise); a
many-arm mode holds one control against several candidates, listed as ``candidates`` or swept
from one role (``sweep``: one of its flags over a list of values, each value a role of its own,
named ``ROLE-VALUE``, made before anything else reads the plan's roles).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from fairwin.errors import InputError
from fairwin.plan.base import NAME_RE, StrictModel
from fairwin.rules.registry import RULES, WIN_ARMS_V1, get_rule
from fairwin.rules.spec import RuleSpec

#: Modes every plan has when it declares the roles they use (runbook: A/B/A and P/B/P).
REGISTERED_MODES: dict[str, tuple[str, str]] = {
    "controlled": ("A", "B"),
    "production-policy": ("P", "B"),
}


class Sweep(StrictModel):
    """One role, one of its flags over a list of values: each value a candidate role of its own."""

    role: str = Field(description="The role whose argv the sweep varies.")
    flag: str = Field(description="The flag whose value it sets (replaced where the argv has it, else appended).")
    values: list[str | int | float] = Field(min_length=2, max_length=8, description="2 to 8 values, one per arm.")

    def arm(self, value: str | int | float) -> str:
        """The role one value makes: ``ROLE-VALUE``."""
        return f"{self.role}-{value}"

    def argv(self, argv: list[str], value: str | int | float) -> list[str]:
        """The role's argv with the flag set to ``value``."""
        if self.flag in argv[:-1]:
            at = argv.index(self.flag) + 1
            return [*argv[:at], str(value), *argv[at + 1 :]]
        return [*argv, self.flag, str(value)]


class Mode(StrictModel):
    """A registered pair: the control role brackets the candidate role (A/A is allowed: it measures noise); or a
    control against several candidates, every arm launched once a round (``candidates``)."""

    control: str
    candidate: str | None = Field(None, description="The candidate role of a two-arm window.")
    candidates: list[str] = Field(
        default_factory=list,
        description="A many-arm window: 2 to 8 candidate roles, each decided against the control, launches shared "
        "(decided by a many-arm rule, win-arms-v1 unless `rule` names another).",
    )
    sweep: Sweep | None = Field(
        None, description="A many-arm window's candidates swept from one role: each value of its flag a role."
    )
    rule: str | None = Field(
        None, description="The registered rule that decides this mode's windows (unset: window.rule, or the default)."
    )
    chain: bool = Field(
        True,
        description="Whether its windows may chain; false for windows whose receipts need the restore and "
        "the watch (an admission, a pair-only window).",
    )

    @model_validator(mode="after")
    def _one_kind_of_candidate(self) -> Mode:
        if (self.candidate is None) == (not self.candidates):
            raise ValueError("a mode names its candidate role, or (a many-arm window) its candidates, not both")
        if self.candidates and (len(set(self.candidates)) != len(self.candidates) or self.control in self.candidates):
            raise ValueError("a many-arm mode's candidates are distinct roles, none of them the control")
        if self.candidates and not 2 <= len(self.candidates) <= 8:
            raise ValueError(f"a many-arm mode has 2 to 8 candidates, not {len(self.candidates)}")
        return self

    @property
    def arms(self) -> tuple[str, ...]:
        """Its candidate roles: one for a two-arm window."""
        return tuple(self.candidates) if self.candidates else (self.candidate or "",)

    @property
    def roles(self) -> tuple[str, ...]:
        """Every role its windows launch, the control first (once, for an A/A mode)."""
        return tuple(dict.fromkeys((self.control, *self.arms)))

    @property
    def many(self) -> bool:
        """Whether it is a many-arm mode."""
        return bool(self.candidates)


def expand_sweeps(data: Any) -> Any:
    """A plan's raw tables with every mode's sweep made into roles and that mode's candidates (the mode keeps its
    sweep, as written). ValueError names a sweep that cannot be made."""
    if not isinstance(data, dict) or not isinstance(data.get("modes"), dict):
        return data
    roles = dict(data.get("roles") or {})
    modes = dict(data["modes"])
    for name, mode in modes.items():
        if not isinstance(mode, dict) or mode.get("sweep") is None:
            continue
        sweep = Sweep.model_validate(mode["sweep"])
        base = roles.get(sweep.role)
        if not isinstance(base, dict) or not isinstance(base.get("argv"), list):
            raise ValueError(f"modes.{name}.sweep.role names role {sweep.role!r}, which is not declared with an argv")
        if mode.get("candidates") or mode.get("candidate"):
            raise ValueError(f"modes.{name}: a sweep makes the candidates; give no candidate or candidates beside it")
        arms = []
        for value in sweep.values:
            arm = sweep.arm(value)
            if not NAME_RE.match(arm) or arm in roles:
                raise ValueError(f"modes.{name}.sweep: value {value!r} makes role {arm!r}, which is not a free name")
            roles[arm] = {**base, "argv": sweep.argv([str(a) for a in base["argv"]], value)}
            arms.append(arm)
        modes[name] = {**mode, "candidates": arms}
    return {**data, "roles": roles, "modes": modes}


def mode_rule(mode_name: str, mode: Mode, window_rule: str | None) -> RuleSpec:
    """The registered rule that decides a mode's windows: the mode's own, else ``window.rule``, else the default
    for its kind (win-arms-v1 for a many-arm mode). InputError names a rule of the other kind."""
    named = mode.rule or window_rule
    rule = get_rule(named if (named is not None or not mode.many) else WIN_ARMS_V1.id)
    if mode.many and rule.kind != "arms":
        raise InputError(
            f"mode {mode_name} has {len(mode.candidates)} candidates; {rule.id} decides one candidate: name a "
            f"many-arm rule ({', '.join(r for r, spec in RULES.items() if spec.kind == 'arms')}) in "
            f"modes.{mode_name}.rule"
        )
    if not mode.many and rule.kind == "arms":
        raise InputError(
            f"mode {mode_name} has one candidate; {rule.id} decides several: list them in "
            f"modes.{mode_name}.candidates, or name a two-arm rule in modes.{mode_name}.rule"
        )
    return rule
