"""``status.json``, the window's one marker of what it is, and the custody states production is left in.

Only ``complete`` is a result. A finished window's status also says what became of production
(``restore``): RESTORED (brought back and the watch held), RESTORE FAILED, or CHAINED (left down
for the chain's next window). These states are compared by the close, the chain, recover and the
promotion gate, so they are one type, here.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from fairwin.formats import STATUS, RecordFormat
from fairwin.records import Record

#: A window's state in status.json: only ``complete`` is a result.
WindowState = Literal["running", "complete", "failed", "interrupted"]

#: What became of production at a window's end.
CustodyState = Literal["RESTORED", "RESTORE FAILED", "CHAINED"]


class Coordinator(BaseModel):
    """Who runs a window: the coordinator's name, the machine it runs on and fairwin's pid there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    host: str
    pid: int


class Restore(BaseModel):
    """Production given back (``up`` and its ``watch``), not given back (``reason``), or left to a chain."""

    model_config = ConfigDict(extra="forbid")

    state: CustodyState
    reason: str | None = None
    up: dict[str, Any] | None = None
    watch: dict[str, Any] | None = None
    placeholders: list[str] | None = None  # CHAINED: the placeholders holding the hardware meanwhile

    @property
    def restored(self) -> bool:
        return self.state == "RESTORED"

    def stored(self) -> dict[str, Any]:
        """As status.json and the journal keep it: only the fields this state has."""
        return self.model_dump(mode="json", exclude_none=True)


class WindowStatus(Record):
    """``status.json``: every state carries its window, state and time; a complete one adds its verdict and
    decision.json's digest, a failed or interrupted one its error, a finished one what became of production."""

    record_format: ClassVar[RecordFormat] = STATUS
    sparse: ClassVar[bool] = True
    model_config = ConfigDict(extra="allow")  # a newer fairwin's additions are kept when one is rewritten

    format: Literal["fairwin.status/1"] = "fairwin.status/1"
    window_id: str
    state: WindowState
    time: float
    coordinator: Coordinator | None = None
    verdict: str | None = None
    decision_sha256: str | None = None
    error: str | None = None
    error_type: str | None = None
    restore: Restore | None = None
    chain: dict[str, Any] | None = None
    archive: dict[str, Any] | None = None
    recovery: dict[str, Any] | None = None

    @property
    def chain_id(self) -> str | None:
        found = (self.chain or {}).get("chain_id")
        return found if isinstance(found, str) and found else None
