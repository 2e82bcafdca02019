"""Gate receipts: JSON documents that carry the sha256 of their inputs and of themselves.

A receipt's own ``sha256`` is taken over its canonical JSON without that field, so
anyone can check that a receipt was not edited after it was written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fairwin.errors import GateRefused
from fairwin.receipts import canonical_json, sha256_bytes, write_json_atomic


def seal(document: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in document.items() if k != "sha256"}
    return {**body, "sha256": sha256_bytes(canonical_json(body).encode("utf-8"))}


def write_receipt(path: Path, document: dict[str, Any]) -> dict[str, Any]:
    sealed = seal(document)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, sealed)
    return sealed


def read_receipt(path: Path, expected_format: str) -> dict[str, Any]:
    """A receipt whose seal holds and whose format is the expected one; refuses otherwise."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GateRefused(f"{path}: no such receipt") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise GateRefused(f"{path}: not a JSON receipt") from None
    if not isinstance(document, dict) or document.get("format") != expected_format:
        found = document.get("format") if isinstance(document, dict) else None
        raise GateRefused(f"{path}: a {found!r} document, not a {expected_format} receipt")
    if "sha256" in document and seal(document)["sha256"] != document["sha256"]:
        raise GateRefused(f"{path}: its sha256 does not match its contents; the receipt was edited after writing")
    return document
