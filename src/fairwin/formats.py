"""Every stored and printed record's format: the id fairwin writes and the ids it reads.

This is the bottom layer: it imports nothing from fairwin, so a format id is spelt once,
here, and docs/formats.md lists the same formats with their history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict


@dataclass(frozen=True)
class RecordFormat:
    """A stored record's format: the id fairwin writes, and every id this fairwin reads."""

    name: str
    version: int
    reads: tuple[int, ...] = ()  # versions read besides ``version`` (older ones still understood)

    @property
    def id(self) -> str:
        return f"{self.name}/{self.version}"

    @property
    def readable(self) -> tuple[str, ...]:
        return tuple(f"{self.name}/{v}" for v in sorted({*self.reads, self.version}))


# A window directory.
WINDOW = RecordFormat("fairwin.window", 1)
STATUS = RecordFormat("fairwin.status", 1)
START = RecordFormat("fairwin.start", 1)
WAVE = RecordFormat("fairwin.wave", 1)
STREAM = RecordFormat("fairwin.stream", 2, reads=(1,))
CHUNKS = RecordFormat("fairwin.chunks", 1)
TELEMETRY = RecordFormat("fairwin.telemetry", 1)
PREPARED_PROMPT = RecordFormat("fairwin.prepared-prompt", 1)
POOLED = RecordFormat("fairwin.pooled", 1)
CONTEXT = RecordFormat("fairwin.decision-context", 1)
DECISION = RecordFormat("fairwin.decision", 2)
BUDGET = RecordFormat("fairwin.budget", 1)
PROGRESS = RecordFormat("fairwin.progress", 1)
GREEDY = RecordFormat("fairwin.greedy", 1)
PROMOTION = RecordFormat("fairwin.promotion", 1)
JOURNAL = RecordFormat("fairwin.journal", 1)
# Production and chains.
PRODUCTION_SNAPSHOT = RecordFormat("fairwin.production-snapshot", 1)
PRODUCTION_LIVE = RecordFormat("fairwin.production-live", 1)
PRODUCTION_STATE = RecordFormat("fairwin.production-state", 1)
# The hardware's lock: which window holds production's hardware, and who runs it.
LOCK = RecordFormat("fairwin.lock", 1)
CHAIN_MARKER = RecordFormat("fairwin.chain-marker", 1)
# Printed, not stored: `fairwin decide --json` and `fairwin rules audit --json`.
DECISIONS = RecordFormat("fairwin.decisions", 1)
AUDIT = RecordFormat("fairwin.audit", 1)
COMPARISON = RecordFormat("fairwin.comparison", 1)
# Receipts, prompt orders and the control archive.
ADMISSION = RecordFormat("fairwin.admission", 1)
CARRY = RecordFormat("fairwin.carry", 1)
GATE_RUN = RecordFormat("fairwin.gate-run", 1)
REHEARSAL = RecordFormat("fairwin.rehearsal", 1)
ORDER = RecordFormat("fairwin.order", 1)
STAGE = RecordFormat("fairwin.stage", 1)
ARCHIVE = RecordFormat("fairwin.archive", 2, reads=(1,))

#: A window's state in status.json: only ``complete`` is a result.
WindowState = Literal["running", "complete", "failed", "interrupted"]


class WindowStatus(BaseModel):
    """The fields of ``status.json`` every state carries; a complete one adds its verdict and
    decision.json's digest, a failed or interrupted one its error (kept as extra fields)."""

    model_config = ConfigDict(extra="allow")

    format: str
    window_id: str
    state: WindowState
    time: float
