"""Every example plan in examples/ loads and validates, with every file it pins."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairwin.plan import load_plan

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.toml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_example_plan_loads(path: Path) -> None:
    loaded = load_plan(path)
    assert loaded.plan.cells and loaded.sha256
