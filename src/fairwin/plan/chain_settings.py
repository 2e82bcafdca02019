"""The plan's ``[chain]``: windows that leave production down between them, and what holds the hardware meanwhile.

A chained window ends with production still down and **placeholders** running: commands
that keep the hardware reserved (a process holding the GPUs' memory, a scheduler
reservation) until the next window of the chain takes them down. A **marker** file says
a chain is in progress; its path is the plan's ``marker``, or ``FAIRWIN_CHAIN_MARKER``
(which wins, so that a test suite can never touch a live chain's marker).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from fairwin.plan.base import StrictModel, check_names


class Placeholder(StrictModel):
    """A command that keeps the hardware reserved between chained windows; fairwin runs it detached."""

    argv: list[str] = Field(min_length=1, description="The command; it must keep running until taken down.")
    env: dict[str, str] = Field(
        default_factory=dict, description="Added to fairwin's own environment (on a host: to its login's)."
    )
    host: str | None = Field(
        None,
        description="Run it on this [hosts.NAME], in a detached tmux session there, or on this [cluster] hosts "
        "name's node, as a step of the chain's hold job (default: here; in a chain on Slurm, a step on the window's "
        "node).",
    )
    tmux_socket: str | None = Field(
        None, description="On a host: the tmux socket its session lives on (tmux -L NAME; default: the default one)."
    )
    port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="A port it listens on here: proved free before a chain is admitted and "
        "before it starts (else another process would hold the hardware in its name).",
    )
    settle_s: float = Field(0.5, ge=0, le=60, description="It must still run this long after its start.")
    stop_timeout_s: float = Field(10.0, gt=0, description="SIGTERM, then SIGKILL after this long.")


class ChainSettings(StrictModel):
    marker: Path | None = Field(
        None, description="The chain's marker (default: OUTPUT_DIR/.chain.json; FAIRWIN_CHAIN_MARKER wins)."
    )
    placeholders: dict[str, Placeholder] = Field(
        default_factory=dict, description="Commands that hold the hardware while production is left down."
    )

    @field_validator("placeholders")
    @classmethod
    def _names(cls, value: dict[str, Placeholder]) -> dict[str, Placeholder]:
        return check_names(value, "placeholder name")
