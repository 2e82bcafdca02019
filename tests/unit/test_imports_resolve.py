"""Code the fast suite never imports (benchmarks, run by hand; e2e tests, run where vLLM is installed):
at least every fairwin name it imports must exist, so a rename cannot leave it broken unseen."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNIMPORTED = sorted([*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "tests" / "e2e").glob("*.py")])


@pytest.mark.parametrize("path", UNIMPORTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fairwin_name_it_imports_exists(path: Path) -> None:
    missing = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fairwin"):
            module = importlib.import_module(node.module or "")
            missing += [f"{node.module}.{a.name}" for a in node.names if not hasattr(module, a.name)]
    assert not missing, f"{path.name} imports names that no longer exist: {missing}"
