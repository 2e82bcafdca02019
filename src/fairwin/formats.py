"""Every stored and printed record's format: the id fairwin writes and the ids it reads.

This is the bottom layer: it imports nothing from fairwin, so a format id is spelt once,
here, and docs/formats.md lists the same formats with their history.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RecordFormat:
    """A stored record's format: the id fairwin writes, and every id this fairwin reads."""

    name: str
    version: int
    reads: tuple[int, ...] = ()  # versions read besides ``version`` (older ones still understood)
    #: The record's model, as ``module:Class`` (named, not imported: this layer imports nothing of
    #: fairwin's; tests/unit/test_records.py resolves each and holds it to this format).
    model: str = field(kw_only=True)

    @property
    def id(self) -> str:
        return f"{self.name}/{self.version}"

    @property
    def readable(self) -> tuple[str, ...]:
        return tuple(f"{self.name}/{v}" for v in sorted({*self.reads, self.version}))


# A window directory.
WINDOW = RecordFormat("fairwin.window", 1, model="fairwin.directory.manifest:WindowManifest")
STATUS = RecordFormat("fairwin.status", 1, model="fairwin.directory.status:WindowStatus")
START = RecordFormat("fairwin.start", 1, model="fairwin.directory.start_receipt:StartReceipt")
WAVE = RecordFormat("fairwin.wave", 1, model="fairwin.directory.start_receipt:WaveRow")
STREAM = RecordFormat("fairwin.stream", 2, reads=(1,), model="fairwin.client.stream:StreamRecord")
CHUNKS = RecordFormat("fairwin.chunks", 1, model="fairwin.client.timeline:ChunkTimeline")
TELEMETRY = RecordFormat("fairwin.telemetry", 1, model="fairwin.telemetry.sampler:TelemetryRow")
PREPARED_PROMPT = RecordFormat("fairwin.prepared-prompt", 1, model="fairwin.client.prepare:PreparedPrompt")
POOLED = RecordFormat("fairwin.pooled", 1, model="fairwin.rows:PooledRow")
CONTEXT = RecordFormat("fairwin.decision-context", 1, model="fairwin.decision.inputs:WindowContext")
DECISION = RecordFormat("fairwin.decision", 4, reads=(2, 3), model="fairwin.decision.document:Decision")
BUDGET = RecordFormat("fairwin.budget", 1, model="fairwin.directory.gate_summary:BudgetRecord")
PROGRESS = RecordFormat("fairwin.progress", 1, model="fairwin.window.progress:ProgressEvent")
GREEDY = RecordFormat("fairwin.greedy", 1, model="fairwin.decision.divergence:GreedyStream")
PROMOTION = RecordFormat("fairwin.promotion", 1, model="fairwin.promote.check:PromotionRecord")
JOURNAL = RecordFormat("fairwin.journal", 1, model="fairwin.directory.journal:JournalRow")
# Production and chains.
PRODUCTION_SNAPSHOT = RecordFormat(
    "fairwin.production-snapshot", 1, model="fairwin.production.state_records:SnapshotRecord"
)
PRODUCTION_LIVE = RecordFormat("fairwin.production-live", 1, model="fairwin.directory.declaration:LiveRecord")
PRODUCTION_STATE = RecordFormat("fairwin.production-state", 1, model="fairwin.production.state_records:ProductionState")
# The hardware's lock: which window holds production's hardware, and who runs it.
LOCK = RecordFormat("fairwin.lock", 1, model="fairwin.directory.lock_record:LockRecord")
CHAIN_MARKER = RecordFormat("fairwin.chain-marker", 1, model="fairwin.custody.chain:Marker")
CHAIN_END = RecordFormat("fairwin.chain-end", 1, model="fairwin.custody.chain_receipts:ChainEndReceipt")
# Printed, not stored: `fairwin decide --json` and `fairwin rules audit --json`.
DECISIONS = RecordFormat("fairwin.decisions", 1, model="fairwin.decision.document:DecisionsPrinted")
AUDIT = RecordFormat("fairwin.audit", 1, model="fairwin.decision.audit:AuditResult")
COMPARISON = RecordFormat("fairwin.comparison", 1, model="fairwin.report.compare:Comparison")
# Receipts, prompt orders and the control archive.
ADMISSION = RecordFormat("fairwin.admission", 1, model="fairwin.gates.foreign_admission:AdmissionRecord")
CARRY = RecordFormat("fairwin.carry", 1, model="fairwin.gates.qualify:CarryRecord")
GATE_RUN = RecordFormat("fairwin.gate-run", 1, model="fairwin.gates.correctness:GateRunRecord")
REHEARSAL = RecordFormat("fairwin.rehearsal", 2, reads=(1,), model="fairwin.gates.rehearsal:RehearsalRecord")
ORDER = RecordFormat("fairwin.order", 1, model="fairwin.plan.order:PromptOrder")
STAGE = RecordFormat("fairwin.stage", 1, model="fairwin.custody.stage:StageRecord")
ARCHIVE = RecordFormat("fairwin.archive", 2, reads=(1,), model="fairwin.archive.archive_row:ArchiveRow")
ARCHIVE_DROP = RecordFormat("fairwin.archive-drop", 1, model="fairwin.archive.archive_row:ImportDropped")

#: Every format, in the order above.
REGISTRY: tuple[RecordFormat, ...] = tuple(v for v in dict(globals()).values() if isinstance(v, RecordFormat))
