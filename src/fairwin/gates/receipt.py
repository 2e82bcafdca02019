"""Gate receipts: JSON documents that carry the sha256 of their inputs and of themselves.

A receipt's own ``sha256`` is taken over its canonical JSON without that field, so
anyone can check that a receipt was not edited after it was written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fairwin.errors import CorruptRecordError, GateRefused, InputError
from fairwin.files import canonical_json, read_json, sha256_bytes, write_json_atomic
from fairwin.formats import RecordFormat


def seal(document: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in document.items() if k != "sha256"}
    return {**body, "sha256": sha256_bytes(canonical_json(body).encode("utf-8"))}


def write_receipt(path: Path, document: dict[str, Any]) -> dict[str, Any]:
    sealed = seal(document)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, sealed)
    return sealed


def read_receipt(path: Path, kind: RecordFormat, *, sealed: bool = True) -> dict[str, Any]:
    """A receipt whose seal holds and whose format is the expected one.

    Missing: :class:`InputError`. Torn, not JSON, another format, unsealed or edited after
    writing: :class:`CorruptRecordError`. Both exit 2; a gate's refusal of a sound receipt
    (a FAIL verdict, another commit) is the caller's :class:`GateRefused`. ``sealed=False``
    is for receipts another tool writes (the admission): their seal is checked when present.
    """
    if not path.exists():
        raise InputError(f"{path}: no such receipt")
    document = read_json(path, kind.readable)
    if not sealed and "sha256" not in document:
        return document
    if not isinstance(document.get("sha256"), str):
        raise CorruptRecordError(f"{path}: the receipt carries no sha256 seal; it was not written by fairwin as is")
    if seal(document)["sha256"] != document["sha256"]:
        raise CorruptRecordError(f"{path}: its sha256 does not match its contents; it was edited after writing")
    return document


def require_admitting(
    path: Path, document: dict[str, Any], *, what: str, verdict: str, at: str, head: str, again: str
) -> None:
    """Refuse (a gate's refusal, exit 4) a sound receipt whose verdict is not ``verdict``, or whose commit
    field ``at`` is not the commit under test: ``again`` says how to get one that is."""
    if document.get("verdict") != verdict:
        raise GateRefused(f"{what}: receipt {path} is {document.get('verdict')}, not {verdict}")
    if document.get(at) != head:
        raise GateRefused(
            f"{what}: receipt {path} is for commit {str(document.get(at))[:12]}, not the commit under test "
            f"{head[:12]}; {again}"
        )
