"""The package reads top-down: a module imports only its own package and the layers below it.

The order follows the data: shared words and the window directory's model at the bottom,
then the decision (pure), the plan, starting servers, counters, waves, pooling, gates,
the archive, reports, the custody of production's hardware, the window that drives them
all, and the command line on top. Function-level imports count too: a lazy
import from a lower layer to a higher one is still a cycle waiting to happen.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "fairwin"

LAYERS = (
    "_version",
    "errors",
    "redaction",
    "files",
    "formats",
    "records",
    "rows",
    "profiles",
    "transport",
    "commands",
    "directory",
    "rules",
    "decision",
    "plan",
    "launch",
    "telemetry",
    "production",
    "metrics",
    "client",
    "pooling",
    "gates",
    "archive",
    "report",
    "verdict",
    "custody",
    "window",
    "promote",
    "sim",
    "cli",
    "__main__",
    "(api)",
)


def _package(module: str) -> str:
    parts = module.split(".")
    return "(api)" if len(parts) == 1 else parts[1]


def _imports(path: Path) -> list[tuple[str, int]]:
    module = "fairwin." + ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
    module = module.removesuffix(".__init__")
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("fairwin"):
            assert node.module is not None
            found.append((node.module, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.startswith("fairwin")]
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}:{node.lineno}: relative import; write the absolute module ({module})")
    return found


def test_every_package_has_a_layer() -> None:
    packages = {_package("fairwin." + p.relative_to(SRC).with_suffix("").parts[0]) for p in SRC.rglob("*.py")}
    packages.discard("__init__")
    assert packages <= set(LAYERS), f"add to LAYERS: {sorted(packages - set(LAYERS))}"


def test_no_import_runs_from_a_lower_layer_to_a_higher_one() -> None:
    upward = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        own = "(api)" if parts == ("__init__",) else parts[0]
        for target, line in _imports(path):
            theirs = _package(target)
            if theirs != own and LAYERS.index(theirs) > LAYERS.index(own):
                upward.append(f"{path.relative_to(SRC)}:{line}: {own} imports {target}")
    assert not upward, "\n".join(upward)
