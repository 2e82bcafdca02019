"""Typed records of a window's directory that more than one layer writes or reads: the gates' summary and the budget.

``budget.json`` is written by the window's last step and read by the budget gate of
every later window (the costs earlier windows measured): one model for both. The estimate it
carries is the one the gates admitted the window on, kept in window.json's ``gates``.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from fairwin.directory.journal import started
from fairwin.formats import BUDGET, RecordFormat
from fairwin.records import Record


class BudgetEstimate(BaseModel):
    """The estimate a window was admitted on (the budget gate's, in window.json's gates and in budget.json).

    A window admitted before the sequential rules' first look carries only the first five fields; the rest
    default to what such a window's estimate meant (no look before the last start, no measured reserve).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    measurement_end_s: float = Field(gt=0, description="Seconds from the open to the end of the last start.")
    reserve_total_s: float = Field(description="The restore and the reserve after the last start.")
    dry_bound_s: float = Field(description="The dry plan's bound on the whole window.")
    per_start_s: dict[str, float] = Field(description="Each start's estimated seconds, by start name.")
    sources: dict[str, str] = Field(description="Where each estimated cost came from.")
    close_reserve_s: float = 0.0
    pair_reserve_measured: bool = False
    first_look: int | None = None  # the starts before a sequential rule's first look; None for a fixed rule
    first_look_end_s: float | None = None


class ReceiptRef(BaseModel):
    """A receipt a window was given, as it was given: its path and the sha256 it had then."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    sha256: str


class QualificationRef(ReceiptRef):
    """The qualification carried to the window; ``admission`` says how another tool's admission was read."""

    admission: str | None = None


class GateSummary(BaseModel):
    """What the gates passed a window on, kept as window.json's ``gates`` and read by the promotion gate."""

    model_config = ConfigDict(extra="forbid")

    expected_commit: str | None = None  # the commit the plan's checkout had to be at
    head: str | None = None  # the commit the gates bound the window to
    qualification: QualificationRef | None = None
    gates: list[ReceiptRef] | None = None
    artifacts_on_hosts: dict[str, list[str]] | None = None  # each gate artifact -> the identity pins holding it
    rehearsal: ReceiptRef | None = None
    budget: BudgetEstimate
    checkouts: dict[str, dict[str, str]] | None = None  # each pinned checkout, by process label: path, commit


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
