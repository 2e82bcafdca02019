"""docs/formats.md's field tables are the models': every field a record has is in its table, and nothing else.

A section headed with a format id (``## `fairwin.start/1` ``) holds a table whose first column names
fields in backticks; the model the registry names for that format must have exactly those fields
(``format`` itself aside). The records a window directory and production's state keep must each have
a table; the others are documented on their own pages (decision.md, gates.md, archive.md, ...).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from fairwin.formats import REGISTRY, RecordFormat
from fairwin.records import Record

DOC = Path(__file__).resolve().parents[2] / "docs" / "formats.md"
SECTION = re.compile(r"^## `(fairwin\.[a-z-]+/\d+)`\n(.*?)(?=^## |\Z)", re.M | re.S)
TABLED = {
    "fairwin.window/1",
    "fairwin.status/1",
    "fairwin.journal/1",
    "fairwin.start/1",
    "fairwin.wave/1",
    "fairwin.stream/2",
    "fairwin.chunks/1",
    "fairwin.telemetry/1",
    "fairwin.prepared-prompt/1",
    "fairwin.pooled/1",
    "fairwin.decision-context/1",
    "fairwin.budget/1",
    "fairwin.greedy/1",
    "fairwin.lock/1",
    "fairwin.production-state/1",
    "fairwin.production-live/1",
    "fairwin.chain-marker/1",
    "fairwin.chain-end/1",
    "fairwin.order/1",
}


def _tables() -> dict[str, set[str]]:
    found = {}
    for fmt_id, body in SECTION.findall(DOC.read_text()):
        rows = [line for line in body.splitlines() if line.startswith("| `")]
        found[fmt_id] = {name for row in rows for name in re.findall(r"`([a-z_0-9]+)`", row.split("|")[1])}
    return found


def _model(fmt: RecordFormat) -> type[Record]:
    module, _, name = fmt.model.partition(":")
    model: type[Record] = getattr(importlib.import_module(module), name)
    return model


def test_every_stored_record_of_a_window_and_of_production_has_a_table() -> None:
    assert set(_tables()) >= TABLED, f"add a field table to docs/formats.md for {sorted(TABLED - set(_tables()))}"


@pytest.mark.parametrize("fmt", [f for f in REGISTRY if f.id in TABLED], ids=lambda f: f.id)
def test_the_table_names_exactly_the_models_fields(fmt: RecordFormat) -> None:
    documented = _tables().get(fmt.id, set())
    fields = set(_model(fmt).model_fields) - {"format"}
    assert not fields - documented, f"docs/formats.md's {fmt.id} table lacks {sorted(fields - documented)}"
    assert not documented - fields, f"docs/formats.md's {fmt.id} table names no field {sorted(documented - fields)}"
