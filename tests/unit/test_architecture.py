"""docs/architecture.md names every package and top-level module of src/fairwin, in the order of their layers."""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit.test_layers import LAYERS

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "fairwin"
DOC = ROOT / "docs" / "architecture.md"


def listed() -> list[str]:
    """The packages and modules the document's package list names in bold, in its order (``fairwin/NAME``)."""
    section = DOC.read_text().split("## Packages, bottom to top", 1)[1].split("\n## ", 1)[0]
    return [name.removesuffix(".py").rstrip("/") for name in re.findall(r"\*\*`fairwin/([\w./]+)`\*\*", section)]


def present() -> set[str]:
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in SRC.glob("*.py")}
    return packages | modules


def test_every_package_and_module_is_in_the_document() -> None:
    missing = present() - set(listed())
    assert not missing, f"docs/architecture.md does not name: {sorted(missing)}"


def test_the_document_names_nothing_that_is_gone() -> None:
    gone = set(listed()) - present()
    assert not gone, f"docs/architecture.md names what src/fairwin no longer has: {sorted(gone)}"


def test_the_packages_are_listed_in_the_order_of_their_layers() -> None:
    rank = {layer: n for n, layer in enumerate(LAYERS)}
    rank["__init__"] = rank["(api)"]
    layered = [name for name in listed() if name in rank]
    assert layered == sorted(layered, key=rank.__getitem__), "order the packages as tests/unit/test_layers.py does"


def test_every_module_the_document_points_to_exists() -> None:
    text = DOC.read_text()
    paths = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", text))  # under src/fairwin, src or the repository
    missing = sorted(p for p in paths if not any((base / p).exists() for base in (SRC, SRC.parent, ROOT)))
    assert not missing, f"docs/architecture.md points to files that do not exist: {missing}"
