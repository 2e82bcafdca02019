"""Gate receipts: records that carry the sha256 of their inputs and of themselves.

A receipt's own ``sha256`` is taken over its canonical JSON without that field, so
anyone can check that a receipt was not edited after it was written. The seal is checked
on the file's own JSON, before the record is read into its model, so a receipt written by
an older fairwin (without a field added since) is checked as it was written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from fairwin.errors import CorruptRecordError, InputError
from fairwin.files import canonical_json, read_json, sha256_bytes, write_json_atomic
from fairwin.records import Record, validated


class Receipt(Record):
    """A sealed record: ``sha256`` is set by :func:`write_receipt` (None before it is written)."""

    sha256: str | None = None


R = TypeVar("R", bound=Receipt)


def seal(document: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in document.items() if k != "sha256"}
    return {**body, "sha256": sha256_bytes(canonical_json(body).encode("utf-8"))}


def write_receipt(path: Path, receipt: R) -> R:
    """The receipt sealed and written atomically; returned with its seal."""
    sealed = seal(receipt.stored())
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, sealed)
    return receipt.model_copy(update={"sha256": sealed["sha256"]})


def read_receipt(path: Path, model: type[R], *, sealed: bool = True) -> R:
    """A receipt whose seal holds and whose format is the expected one.

    Missing: :class:`InputError`. Torn, not JSON, another format, unsealed, edited after
    writing or not of its format's shape: :class:`CorruptRecordError`. Both exit 2; a gate's
    refusal of a sound receipt (a FAIL verdict, another commit) is :func:`admitting_problems`'s.
    ``sealed=False`` is for receipts another tool writes (the admission): their seal is checked when present.
    """
    if not path.exists():
        raise InputError(f"{path}: no such receipt")
    document = read_json(path, model.record_format.readable)
    if sealed or "sha256" in document:
        if not isinstance(document.get("sha256"), str):
            raise CorruptRecordError(f"{path}: the receipt carries no sha256 seal; it was not written by fairwin as is")
        if seal(document)["sha256"] != document["sha256"]:
            raise CorruptRecordError(f"{path}: its sha256 does not match its contents; it was edited after writing")
    return validated(model, document, str(path))


def admitting_problems(
    path: Path, verdict_found: str, commit_found: str | None, *, what: str, verdict: str, head: str, again: str
) -> list[str]:
    """Why a sound receipt does not admit: its verdict is not ``verdict``, or its commit is not the commit under
    test (``again`` says how to get one that is); [] when it admits."""
    if verdict_found != verdict:
        return [f"{what}: receipt {path} is {verdict_found}, not {verdict}"]
    if commit_found != head:
        return [
            f"{what}: receipt {path} is for commit {str(commit_found)[:12]}, not the commit under test "
            f"{head[:12]}; {again}"
        ]
    return []
