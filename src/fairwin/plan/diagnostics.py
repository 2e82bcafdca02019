"""The plan's ``[diagnostics.greedy]``: temperature-0 streams with top-2 logprobs on chosen starts (docs/greedy.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from fairwin.plan.base import StrictModel


class GreedySettings(StrictModel):
    on: list[Literal["control", "candidate"]] | None = Field(
        None, description="Which starts are diagnosed (default: the candidate; in production-policy mode also P)."
    )
    every_start: bool = Field(False, description="Every start of those kinds, not only the first of each.")
    cells: list[str] | None = Field(None, description="The cells whose prompts are used (default: deciding cells).")
    prompts: int = Field(4, ge=1, le=256, description="Prompts per cell: the first N of its prepared prompts.")
    max_tokens: int = Field(64, ge=1, le=8192, description="Tokens per greedy stream (EOS ignored).")
    near_tie_margin: float = Field(
        0.1, gt=0, description="A divergence whose two tokens lie within this many nats of each other is a near-tie."
    )
    reference: Path | None = Field(None, description="A stored greedy.jsonl to compare every stream against.")


class Diagnostics(StrictModel):
    greedy: GreedySettings | None = Field(None, description="Greedy correctness diagnostics after each chosen start.")
