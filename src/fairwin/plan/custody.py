"""The plan's ``[custody]``: a team's own hold on the hardware, taken beside fairwin's.

A team moving over keeps its own scheduler for a while (the runbook's scoped HOLD,
``window.sh``); fairwin's lock never sees it, nor it fairwin's. With ``hold_command``
each window runs the team's hold before it touches production (a refusal there refuses
the window, production untouched) and ``release_command`` after production is given
back, or at ``fairwin recover`` when fairwin died holding it.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from fairwin.plan.base import StrictModel


class CustodySettings(StrictModel):
    hold_command: list[str] = Field(
        default_factory=list,
        description="The team's hold, run before production is taken down (FAIRWIN_WINDOW_ID and "
        "FAIRWIN_WINDOW_PATH in its environment); a non-zero exit refuses the window with its output.",
    )
    release_command: list[str] = Field(
        default_factory=list, description="The team's release, run after production is given back, or at recover."
    )
    host: str | None = Field(None, description="Run both on this [hosts.NAME] over SSH (default: here).")
    timeout_s: float = Field(120.0, gt=0, description="Each command's limit: past it, it is killed and has failed.")

    @model_validator(mode="after")
    def _release_needs_a_hold(self) -> CustodySettings:
        if self.release_command and not self.hold_command:
            raise ValueError("release_command releases a hold: give hold_command too")
        return self
