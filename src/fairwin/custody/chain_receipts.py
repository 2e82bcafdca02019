"""Every end of a chain, wherever it happens, as a receipt appended to the output directory's chain ledger.

A chained window's end (CHAINED, ENDED, or ABORTED inside it) is in its own ``status.json``
too; a chain aborted before its next window opened (refused by its gates or its preflight,
by ``fairwin chain check-prev``) or by ``fairwin chain abort`` has no window to hold it.
The ledger (``OUTPUT_DIR/chains.jsonl``, ``fairwin.chain-end/1`` rows, appended under a
lock and fsynced) holds them all alike: the chain, how it ended, its decision (an abort's is
REJECT), why, and the proof of production's restore.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import ConfigDict

from fairwin.directory.status import Restore, TeamRelease
from fairwin.formats import CHAIN_END, RecordFormat
from fairwin.records import Record, append_records, read_records

LEDGER = "chains.jsonl"


class ChainEndReceipt(Record):
    """``fairwin.chain-end/1``: one end of a chain (or of one window's part in it)."""

    record_format: ClassVar[RecordFormat] = CHAIN_END
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["fairwin.chain-end/1"] = "fairwin.chain-end/1"
    time: float
    chain_id: str | None  # None: a window that would have started a chain and held nothing over
    end: Literal["CHAINED", "ENDED", "ABORTED"]
    decision: Literal["REJECT"] | None = None  # an aborted chain's
    verdict: str | None = None  # the window's own verdict, where a window ended this way and decided
    window_id: str | None = None  # None: aborted before its next window opened, or by `fairwin chain abort`
    windows: list[str]  # the chain's windows, in order
    reason: str | None = None
    restore: Restore | None = None  # production's restore and watch (CHAINED: left down, the placeholders)
    placeholders: list[str]  # left holding the hardware (CHAINED), or stopped
    coordinator: str | None = None
    team_release: TeamRelease | None = None  # the chain's team hold released at an abort outside any window


def ledger_path(output_dir: Path) -> Path:
    return output_dir / LEDGER


def write_end(output_dir: Path, receipt: ChainEndReceipt) -> None:
    """One chain end, appended to the ledger (locked and fsynced)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    append_records(ledger_path(output_dir), [receipt])


def last_end(output_dir: Path) -> ChainEndReceipt | None:
    """The ledger's newest receipt; None where no chain has ended here."""
    path = ledger_path(output_dir)
    return read_records(path, ChainEndReceipt)[-1] if path.is_file() and path.stat().st_size else None
