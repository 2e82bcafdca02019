"""Where a running window is, as events a display (or a machine) follows: ``fairwin.progress/1``.

The window emits plain JSON-ready dicts, one per moment a person watching would want
to see:

- ``open``: the window's starts (name, kind, role), the waves each start runs, and the
  budget's estimate of the measurement (``estimate_s``) and of each start; a sequential rule's
  looks (after how many starts) and the estimate to the first (``first_look_estimate_s``);
- ``step``: a journaled step's ``begin``, ``end``, ``failed`` or ``interrupted``
  (``open``, ``production down``, ``start s2``, ``restore``, ``decide`` ...);
- ``wave``: a measured wave done, with its start, cell, key and seconds;
- ``look``: a sequential rule's look (``after`` starts): the window's verdict there (CONTINUE while it goes
  on), each cell's, and ``stop`` when the window runs no more starts ("decided", or the budget's words);
- ``close``: the window's final state, its verdict when it has one, and its directory.

The window never waits on a display: a listener that raises is the display's bug, and
is dropped with one warning rather than failing a measurement.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict

from fairwin.directory.gate_summary import BudgetEstimate
from fairwin.formats import PROGRESS, RecordFormat
from fairwin.plan.schedule import StartSpec
from fairwin.records import Record

log = logging.getLogger(__name__)

ProgressKind = Literal["open", "step", "wave", "look", "close"]


class ProgressEvent(Record):
    """``fairwin.progress/1``: one moment of a running window; each kind's details are its extra fields."""

    record_format: ClassVar[RecordFormat] = PROGRESS
    model_config = ConfigDict(extra="allow")

    format: Literal["fairwin.progress/1"] = "fairwin.progress/1"
    time: float
    window_id: str
    event: ProgressKind


Listener = Callable[[dict[str, Any]], None]


@dataclass
class ProgressFeed:
    """The window's side of the progress events: stamps each and hands it to the listener, if any."""

    window_id: str
    listener: Listener | None = None
    dropped: bool = field(default=False, init=False)

    def emit(self, event: ProgressKind, **details: Any) -> None:
        if self.listener is None or self.dropped:
            return
        given = {k: v for k, v in details.items() if v is not None}
        record = ProgressEvent(time=time.time(), window_id=self.window_id, event=event, **given).stored()
        try:
            self.listener(record)
        except Exception as exc:
            self.dropped = True
            log.warning("progress display dropped after it failed: %s", exc)

    def opened(
        self,
        path: Path,
        order: str,
        starts: Sequence[StartSpec],
        budget: BudgetEstimate,
        waves_per_start: int,
        looks: Sequence[int] = (),
    ) -> None:
        """The ``open`` event: what a display needs to show how far the window has come and what is left;
        ``looks``: after how many starts a sequential rule looks (the window may stop at each)."""
        estimates = budget.per_start_s
        self.emit(
            "open",
            path=str(path),
            order=order,
            estimate_s=budget.measurement_end_s,
            looks=list(looks) or None,
            first_look_estimate_s=budget.first_look_end_s if looks else None,
            waves_per_start=waves_per_start,
            starts=[
                {"name": s.name, "kind": s.kind, "role": s.role, "estimate_s": estimates.get(s.name)} for s in starts
            ],
        )
