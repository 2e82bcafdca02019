"""A window's records read once for one use: a look, the decide step, a replay, the archive step.

window.json, the pooled rows, the journal and every start's receipt are each read once here and
passed on typed, so the parts of one step (the archive's noise keyed as the window's own control
starts, the rows decided, what the receipts saw) read the same bytes, once.
"""

from __future__ import annotations

from dataclasses import dataclass

from fairwin.directory.journal import JournalRow, read_whole
from fairwin.directory.layout import WindowDir
from fairwin.directory.manifest import WindowManifest
from fairwin.directory.start_receipt import StartReceipt
from fairwin.records import read_record, read_records
from fairwin.rows import PooledRow


@dataclass(frozen=True)
class WindowRecords:
    """What a window's directory holds so far; ``pooled`` is empty before its first start pooled a row."""

    manifest: WindowManifest
    pooled: list[PooledRow]
    journal: list[JournalRow]
    receipts: list[StartReceipt]  # in start order

    @classmethod
    def read(cls, window: WindowDir) -> WindowRecords:
        return cls(
            manifest=read_record(window.manifest, WindowManifest),
            pooled=read_records(window.pooled, PooledRow) if window.pooled.exists() else [],
            journal=read_whole(window.journal),
            receipts=window.start_receipts(),
        )

    def receipt(self, start: str) -> StartReceipt | None:
        return next((r for r in self.receipts if r.start == start), None)
