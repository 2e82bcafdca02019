"""A window's directory: where each record lives, its status marker, and its log of HTTP errors.

A window directory is created once (``mkdir`` fails if it exists, so none is ever
overwritten) and carries ``status.json`` from its first moment: ``running`` until
the window ends ``complete``, ``failed`` or ``interrupted``. A directory whose
status is not ``complete`` must never be read as a result.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairwin.directory.journal import Event, record
from fairwin.directory.start_receipt import StartReceipt
from fairwin.directory.status import Coordinator, WindowState, WindowStatus
from fairwin.errors import InputError, OutputDirError
from fairwin.records import read_record, write_record
from fairwin.redaction import ScrubbingFormatter

#: A diagnosed start's greedy streams, in its directory.
GREEDY = "greedy.jsonl"


def new_window_id(mode: str) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{stamp}-{mode}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class WindowDir:
    path: Path
    window_id: str
    coordinator: Coordinator | None = None  # who runs it (name, host, pid): in every status it writes

    @classmethod
    def create(
        cls, output_dir: Path, mode: str, window_id: str | None = None, coordinator: Coordinator | None = None
    ) -> WindowDir:
        window_id = window_id or new_window_id(mode)
        try:
            output_dir.mkdir(parents=True, exist_ok=True)
            path = output_dir / window_id
            path.mkdir()
            (path / "starts").mkdir()
        except FileExistsError:
            raise OutputDirError(f"{output_dir / window_id} already exists; windows are never overwritten") from None
        except OSError as exc:
            raise OutputDirError(
                f"cannot create a window under {output_dir}: {exc.strerror}; choose a writable window.output_dir"
            ) from None
        if not os.access(path, os.W_OK):
            raise OutputDirError(f"{path} is not writable; choose a writable window.output_dir")
        window = cls(path=path, window_id=window_id, coordinator=coordinator)
        window.set_status("running")
        return window

    @classmethod
    def at(cls, path: Path | str) -> WindowDir:
        """The files of the window directory at ``path``, named (nothing is checked or read)."""
        return cls(path=Path(path), window_id=Path(path).name)

    @classmethod
    def existing(cls, path: Path | str) -> WindowDir:
        """A window directory already written, to be read: refused in one line if it is not a directory."""
        path = Path(path)
        if not path.is_dir():
            what = "no such window directory" if not path.exists() else "a file, not a window directory"
            raise InputError(f"{path}: {what}; give the directory that holds the window's window.json")
        return cls.at(path)

    @property
    def context(self) -> Path:
        return self.path / "context.json"

    # Files, in the order the flow writes them.
    @property
    def plan_copy(self) -> Path:
        return self.path / "plan.toml"

    @property
    def manifest(self) -> Path:
        return self.path / "window.json"

    @property
    def status(self) -> Path:
        return self.path / "status.json"

    @property
    def journal(self) -> Path:
        return self.path / "journal.jsonl"

    @property
    def prompts(self) -> Path:
        return self.path / "prompts.jsonl"

    @property
    def streams(self) -> Path:
        return self.path / "streams.jsonl"

    @property
    def waves(self) -> Path:
        return self.path / "waves.jsonl"

    @property
    def pooled(self) -> Path:
        return self.path / "pooled.jsonl"

    @property
    def decision(self) -> Path:
        return self.path / "decision.json"

    @property
    def summary(self) -> Path:
        return self.path / "summary.md"

    @property
    def budget(self) -> Path:
        return self.path / "budget.json"

    @property
    def report_page(self) -> Path:
        return self.path / "report.html"

    @property
    def promotion(self) -> Path:
        return self.path / "promotion.json"

    @property
    def http_errors(self) -> Path:
        return self.path / "http-errors.log"

    def start_receipt(self, start: str) -> Path:
        """The start's receipt (``fairwin.start/1``); reading it makes no directory, as :meth:`start_dir` does."""
        return self.path / "starts" / start / "start.json"

    def start_receipt_paths(self) -> list[Path]:
        """Every start's receipt there is, in start order (s2 before s10)."""
        return self.start_files("start.json")

    def start_files(self, name: str) -> list[Path]:
        """Every start's file of this name there is (``greedy.jsonl``: a diagnosed start's), in start order."""
        return sorted((self.path / "starts").glob(f"*/{name}"), key=lambda path: int(path.parent.name[1:]))

    def greedy(self, start: str) -> Path:
        """The start's greedy diagnostics (``fairwin.greedy/1``), one row per stream."""
        return self.start_dir(start) / GREEDY

    def start_receipts(self) -> list[StartReceipt]:
        """Every start's receipt, read, in start order."""
        return [read_record(path, StartReceipt) for path in self.start_receipt_paths()]

    def start_telemetry(self, start: str) -> Path:
        return self.path / "starts" / start / "telemetry.jsonl"

    def chunks(self, start: str) -> Path:
        """The start's chunk timelines (``fairwin.chunks/1``), one row per stream."""
        return self.start_dir(start) / "chunks.jsonl"

    def start_dir(self, start: str) -> Path:
        path = self.path / "starts" / start
        path.mkdir(parents=True, exist_ok=True)
        return path

    def set_status(self, state: WindowState, **details: Any) -> None:
        """status.json, replaced whole: the state, and what this state carries (``WindowStatus``'s fields)."""
        who = {"coordinator": self.coordinator} if self.coordinator is not None else {}
        status = WindowStatus(window_id=self.window_id, state=state, time=time.time(), **who, **details)
        write_record(self.status, status)

    def amend_status(self, **changes: Any) -> None:
        """status.json rewritten with ``changes`` (a finished window's owed team release, tried again), the rest of
        it as it was: its state, its coordinator, every field it carries."""
        status = read_record(self.status, WindowStatus)
        kept = status.model_dump(exclude_unset=True, exclude={"format", "window_id", "state", "time", "coordinator"})
        who = {"coordinator": status.coordinator} if status.coordinator is not None else {}
        write_record(
            self.status,
            WindowStatus(window_id=self.window_id, state=status.state, time=time.time(), **who, **(kept | changes)),
        )

    def journal_event(self, step: str, event: Event, **details: Any) -> None:
        """A transition of the window's state machine, on disk before it is acted on (directory/journal.py)."""
        record(self.journal, step, event, **details)


@contextlib.contextmanager
def http_errors_logged(path: Path) -> Iterator[None]:
    """Every HTTP error during the window, with the server's whole body, in the window's own log."""
    handler = logging.FileHandler(path, delay=True, encoding="utf-8")
    handler.setLevel(logging.WARNING)
    handler.setFormatter(ScrubbingFormatter("%(asctime)s %(message)s"))
    logger = logging.getLogger("fairwin.http")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        handler.close()
