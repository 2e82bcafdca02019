"""The admission receipt a qualification carries from: fairwin's shape, or another tool's, read as the plan says.

A team's own qualification writes the admission receipt (``fairwin.admission/1`` is the shape
docs/gates.md gives: a verdict, the qualified commit, each qualified file's sha256; a seal is
checked when it has one). A team whose tool writes its own format, with a ``sha256`` field of
its own scheme, declares it in ``[qualification.foreign_admission]``: such a receipt is read by
the fields named there, no fairwin seal is checked on it, and the carry and the gate summary say so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from fairwin.errors import CorruptRecordError
from fairwin.files import json_field, read_json
from fairwin.formats import ADMISSION, RecordFormat
from fairwin.gates.receipt import Receipt, read_receipt
from fairwin.plan.checks import ForeignReceipt


class AdmissionRecord(Receipt):
    """``fairwin.admission/1``: what fairwin reads of an admission receipt, which the team's own qualification
    writes (unsealed; its seal is checked when it has one)."""

    record_format: ClassVar[RecordFormat] = ADMISSION
    model_config = ConfigDict(extra="allow")

    format: Literal["fairwin.admission/1"] = "fairwin.admission/1"
    verdict: str
    commit: str | None = None
    artifacts: dict[str, str] = Field(default_factory=dict, description="file name -> sha256 of what was qualified")


def read_admission(path: Path, foreign: ForeignReceipt | None) -> tuple[AdmissionRecord, str | None]:
    """The admission receipt, and how a foreign one was read (None for fairwin's own shape)."""
    if foreign is not None and path.exists():
        document = read_json(path)
        if document.get("format") == foreign.format:
            return _foreign_admission(path, document, foreign), (
                f"foreign ({foreign.format}): its own seal not checked; read verdict <- {foreign.verdict}, "
                f"commit <- {foreign.commit or '(not read)'}, artifacts <- {foreign.artifacts or '(not read)'}"
            )
    try:
        return read_receipt(path, AdmissionRecord, sealed=False), None
    except CorruptRecordError as exc:
        hint = "" if foreign is not None else "; another tool's receipt: declare [qualification.foreign_admission]"
        raise CorruptRecordError(f"{exc}; an admission receipt is docs/gates.md's shape{hint}") from None


def _foreign_admission(path: Path, document: dict[str, Any], foreign: ForeignReceipt) -> AdmissionRecord:
    """The fields the plan names, read from another tool's receipt; a named field that is missing is refused."""

    def field(name: str) -> Any:
        try:
            return json_field(document, name)
        except KeyError:
            raise CorruptRecordError(
                f"{path}: the foreign admission receipt has no field {name!r} the plan names"
            ) from None

    verdict = field(foreign.verdict)
    artifacts = field(foreign.artifacts) if foreign.artifacts else {}
    if not isinstance(artifacts, dict) or not all(isinstance(v, str) for v in artifacts.values()):
        raise CorruptRecordError(f"{path}: its {foreign.artifacts!r} is not an object of file name -> sha256")
    return AdmissionRecord(
        verdict="QUALIFIED" if verdict in foreign.qualified else str(verdict),
        commit=str(field(foreign.commit)) if foreign.commit else None,
        artifacts=artifacts,
    )
