"""Typed records of a window's directory that more than one layer writes or reads.

``budget.json`` is written by the window's last step and read by the budget gate of
every later window (the costs earlier windows measured): one model for both.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from fairwin.directory.journal import started
from fairwin.formats import BUDGET, RecordFormat
from fairwin.records import Record


class BudgetEstimate(BaseModel):
    """The estimate a window was admitted on: the budget gate's summary, every field it carries kept."""

    model_config = ConfigDict(extra="allow")

    measurement_end_s: float = Field(gt=0)


class BudgetRecord(Record):
    """A finished window's ``budget.json``: the estimate it was admitted on, and the journal's step times."""

    record_format: ClassVar[RecordFormat] = BUDGET
    model_config = ConfigDict(extra="forbid")

    format: Literal["fairwin.budget/1"] = "fairwin.budget/1"
    estimate: BudgetEstimate
    actual_s: dict[str, float] = Field(description="Seconds from the open to the end of each step, by step name.")

    @property
    def starts_ended(self) -> bool:
        """Whether any start finished (a window that failed before its first start measured nothing)."""
        return any(started(step) is not None for step in self.actual_s)

    @property
    def measured_s(self) -> float:
        """When the last start ended, from the window's open: what ``measurement_end_s`` estimated."""
        return max(seconds for step, seconds in self.actual_s.items() if started(step) is not None)
