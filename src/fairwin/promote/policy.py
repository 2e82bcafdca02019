"""A promotion policy (``promote.toml``): what a window must show before its candidate may be promoted."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator

from fairwin.errors import InputError, PlanError
from fairwin.files import sha256_file
from fairwin.plan.base import StrictModel
from fairwin.plan.roles import SHA256_RE
from fairwin.rows import METRICS


class AcceptedRule(StrictModel):
    id: str = Field(min_length=1, description="A registered rule's id, e.g. win2-v1.")
    sha256: str = Field(description="Its sha256 (`fairwin rules show ID`): the rule exactly as registered.")

    @field_validator("sha256")
    @classmethod
    def _digest(cls, value: str) -> str:
        if not SHA256_RE.match(value):
            raise ValueError(f"{value!r} is not 64 lowercase hex digits (see `fairwin rules show ID`)")
        return value


class PromotionPolicy(StrictModel):
    rules: list[AcceptedRule] = Field(min_length=1, description="The rules whose WIN may promote.")
    mode: str = Field("production-policy", description="The mode the window must have run in.")
    require_qualification: bool = Field(True, description="A CARRIED qualification, bound to the gates' commit.")
    require_gates: list[str] = Field(default_factory=list, description="Gate names whose PASS receipt is needed.")
    require_rehearsal: bool = Field(True, description="A PASS rehearsal for the window's own plan.")
    require_metrics: list[str] = Field(
        default_factory=list, description="Metrics every deciding cell must have recorded (primary, guard, reported)."
    )
    accept_unjudged_guards: list[str] = Field(
        default_factory=list,
        description="Guards whose going unjudged does not refuse (recorded in the receipt as accepted): "
        "accepted_per_round where the control does not speculate, so has no rate to compare.",
    )
    require_observed_clock_caps: bool = Field(False, description="Every deciding cell's clock caps observed.")
    require_greedy: bool = Field(True, description="Greedy diagnostics ran (a real divergence always refuses).")
    require_restored: bool = Field(True, description="Production restored and watched at the window's close.")

    @field_validator("require_metrics", "accept_unjudged_guards")
    @classmethod
    def _known_metrics(cls, names: list[str]) -> list[str]:
        unknown = [name for name in names if name not in METRICS]
        if unknown:
            raise ValueError(f"unknown metric(s) {', '.join(map(repr, unknown))}; the metrics are {', '.join(METRICS)}")
        return names


def load_policy(path: Path) -> tuple[PromotionPolicy, str]:
    """The policy and its file's sha256; one line naming the file and the key on any problem."""
    if not path.is_file():
        raise InputError(f"{path}: no such policy file")
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PlanError(f"{path}: not TOML: {exc}") from None
    except RecursionError:
        raise PlanError(f"{path}: nested far deeper than any policy; is it the policy file?") from None
    try:
        return PromotionPolicy.model_validate(data.get("promote", data)), sha256_file(path)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise PlanError(f"{path}: promote.{where}: {first['msg'].removeprefix('Value error, ')}") from None
