"""The plan's ``[telemetry]``: which GPU source a window samples, and how a start's clock cap is read."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from fairwin.plan.base import StrictModel


class TelemetrySettings(StrictModel):
    gpu: Literal["auto", "nvml", "nvidia-smi", "none"] = Field(
        "auto", description="The GPU source: NVML, else nvidia-smi, else none (auto), or exactly one."
    )
    interval_s: float = Field(1.0, gt=0, le=60, description="One sample of every GPU this often, through a start.")
    cap_from: Literal["locked", "applications", "log", "none"] = Field(
        "locked", description="How a start's clock cap is read: the locked clock, the applications clock, its log."
    )
    cap_log_pattern: str | None = Field(
        None, description="With cap_from = 'log': a regex whose first group is the cap in MHz."
    )
    invalidating_dialbacks: list[Literal["thermal", "power"]] = Field(
        ["thermal"], description="Dial-backs that make a cell INCONCLUSIVE; power-cap ones are reported either way."
    )
    production_cap_file: Path | None = Field(
        None, description="An environment file holding production's configured cap (e.g. /etc/environment)."
    )
    production_cap_key: str = Field("GPU_CLOCK_CAP", description="The key of the cap in production_cap_file.")
    watchdog_logs: dict[str, str] = Field(
        default_factory=dict,
        description="A clock watchdog's log on each host ('here': fairwin's own; else a [hosts] name): every line "
        "it adds during the window that watchdog_pattern matches is a dial-back (the window is INCONCLUSIVE).",
    )
    watchdog_pattern: str = Field(
        ".", description="Which of a watchdog log's new lines are dial-backs or re-locks (default: every line)."
    )

    @field_validator("watchdog_pattern")
    @classmethod
    def _a_pattern(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @field_validator("cap_log_pattern")
    @classmethod
    def _one_group(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                compiled = re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
            if compiled.groups < 1:
                raise ValueError("needs a group around the MHz number, e.g. 'clock cap (\\d+) MHz'")
        return value
