"""The plan's sections the gates read: qualification, required gates, runtime checks, the API rehearsal."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, JsonValue, field_validator

from fairwin.plan.base import StrictModel


class ForeignReceipt(StrictModel):
    """An admission receipt another tool writes, in its own format and under its own seal (a `sha256` field of
    another scheme): fairwin reads the fields named here and checks no seal of its own on it."""

    format: str = Field(description="Its `format` field, e.g. 'dsv41.admission/2': a receipt with it is foreign.")
    verdict: str = Field("verdict", description="The field holding its verdict (a dotted path).")
    qualified: list[str] = Field(["QUALIFIED"], min_length=1, description="The verdicts that mean qualified.")
    commit: str | None = Field("commit", description="The field naming the qualified commit (none: not checked).")
    artifacts: str | None = Field(
        None, description="The field holding each qualified file's sha256 (an object of name -> sha256)."
    )


class Qualification(StrictModel):
    """What must not change between the qualified commit and the commit under test."""

    repo: Path = Field(Path(), description="The git work tree, relative to the plan.")
    measurement_layer: list[str] = Field(
        default_factory=list, description="Globs of files allowed to change (the measurement layer)."
    )
    carried_files: list[str] = Field(default_factory=list, description="Files that must be byte-identical.")
    carried_prefixes: list[str] = Field(default_factory=list, description="Every file under these must be identical.")
    carried_units: list[str] = Field(
        default_factory=list, description="path.py::Qualified.Name units that must be AST-identical."
    )
    foreign_admission: ForeignReceipt | None = Field(
        None, description="Admission receipts another tool writes: their format, and the fields fairwin reads."
    )

    @field_validator("carried_units")
    @classmethod
    def _unit_form(cls, value: list[str]) -> list[str]:
        for unit in value:
            path, sep, name = unit.partition("::")
            if not sep or not path.endswith(".py") or not name:
                raise ValueError(f"{unit!r} is not path.py::QualifiedName")
        return value


class GatesSettings(StrictModel):
    required: list[str] = Field(
        default_factory=list,
        description="Gates every window must be given: qualification, rehearsal, gate:NAME (`fairwin gate run`'s).",
    )

    @field_validator("required")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        for gate in value:
            if gate not in ("qualification", "rehearsal") and not (gate.startswith("gate:") and len(gate) > 5):
                raise ValueError(f"{gate!r} is not a gate: qualification, rehearsal or gate:NAME")
        return value


class Runtime(StrictModel):
    standard_verification: bool = Field(
        True,
        description="Every start's speculative config must use standard verification (as the runbook requires; "
        "false opts out). It only constrains starts that speculate.",
    )
    check_env: bool = Field(True, description="Compare every start's real environment with the declared one.")
    accept_unobserved: list[Literal["speculative", "clocks", "gpus"]] = Field(
        default_factory=list,
        description="Checks the plan accepts to run without their input, each recorded in decision.json: "
        "'speculative' (a server that reports no speculative config, and whose argv states none), 'clocks' "
        "(a plan with a production clock cap but no GPU source and no cap log), 'gpus' (a GPU plan's quiet "
        "proof on a host whose GPUs nothing reads: what computes there is unseen).",
    )


class ControlProbe(StrictModel):
    """A request that must come back with ``expect_status``: proof the rehearsal sees that failure."""

    name: str
    body: dict[str, JsonValue] = Field(description="Merged into the warm-up request's body.")
    expect_status: int = Field(ge=100, le=599)


class RehearsalSettings(StrictModel):
    url: str | None = Field(None, description="Production's base URL, which rehearsals must be made against.")
    model: str | None = Field(None, description="Production's served model (default: the first role's).")
    priority: int | Literal[False] = Field(
        10, description="Sent as `priority` with every probe (10: behind production's own requests); false: never."
    )
    real_prompts: bool = Field(
        False, description="Each cell's probe sends one of its real prompts, cut to its prompt_tokens (32K too)."
    )
    eos_token_id: int | None = Field(
        None, description="The model's end-of-sequence token: a terminator probe forces it (`allowed_token_ids`)."
    )
    api_key_env: str | None = Field(
        None, description="The env variable holding production's API key (default: production's api_key_env)."
    )
    max_age_h: float = Field(24.0, gt=0, description="--require-rehearsal refuses an older rehearsal.")
    controls: list[ControlProbe] = Field(
        default_factory=lambda: [ControlProbe(name="logit_bias", body={"logit_bias": {"1": 1.0}}, expect_status=400)],
        description="Default: logit_bias must be refused (vLLM refuses it whenever speculation is on).",
    )
