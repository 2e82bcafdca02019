"""Docs that cannot drift: every plan key is in docs/plan.md, every command-line flag in README.md or docs/."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from fairwin.plan import models

DOCS = Path(__file__).resolve().parents[2] / "docs"


def plan_sections() -> list[tuple[str, type[BaseModel]]]:
    found = []
    for name, field in models.Plan.model_fields.items():
        annotation = field.annotation
        # A section is a model, or a table of models (roles, modes, families, cells).
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        for candidate in candidates:
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                found.append((name, candidate))
    return found


@pytest.mark.parametrize(("section", "model"), plan_sections(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_plan_key_is_documented(section: str, model: type[BaseModel]) -> None:
    text = (DOCS / "plan.md").read_text()
    missing = [key for key in model.model_fields if f"`{key}`" not in text and f"`{section}.{key}`" not in text]
    assert not missing, f"[{section}] keys not in docs/plan.md: {missing}"


def cli_flags() -> list[tuple[str, str]]:
    """(command, --flag) for every long option of every command and subcommand."""
    from fairwin.cli import build_parser

    found: list[tuple[str, str]] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:  # argparse keeps its actions here; it has no public listing
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}".strip())
            for flag in action.option_strings:
                if flag.startswith("--") and flag not in ("--help", "--version"):
                    found.append((path or "(global)", flag))

    walk(build_parser(), "")
    return sorted(set(found))


@pytest.mark.parametrize(("command", "flag"), cli_flags())
def test_every_cli_flag_is_documented(command: str, flag: str) -> None:
    text = (DOCS.parent / "README.md").read_text() + "".join(p.read_text() for p in sorted(DOCS.glob("*.md")))
    assert flag in text, f"`fairwin {command} {flag}` is documented in neither README.md nor docs/"


def test_the_public_api_loads_and_docs_api_lists_exactly_it() -> None:
    import fairwin

    for name in fairwin.__all__:
        assert getattr(fairwin, name) is not None, name
    text = (DOCS / "api.md").read_text()
    documented = set(re.findall(r"`([A-Za-z_]+)(?:\(|`)", text)) & (set(dir(fairwin)) | set(fairwin.__all__))
    assert documented == set(fairwin.__all__), sorted(set(fairwin.__all__) ^ documented)
    with pytest.raises(AttributeError, match="no attribute 'internal_thing'"):
        _ = fairwin.internal_thing  # type: ignore[attr-defined]


def test_every_runbook_row_names_tests_that_exist() -> None:
    """docs/runbook.md says 'done' only with the tests that show it: each row of its tables names at least one
    `tests/`-relative test (`integration/test_x.py::test_name`), and each named test is defined in that file."""
    tests = DOCS.parent / "tests"
    rows = [line for line in (DOCS / "runbook.md").read_text().splitlines() if line.startswith("| ")]
    rows = [row for row in rows if not row.startswith(("| Runbook requirement", "|---"))]
    assert len(rows) > 70  # every table of the page, not an empty selection
    for row in rows:
        named = re.findall(r"`((?:unit|integration|e2e)/test_\w+\.py)::(test_\w+)`", row.rsplit(" | ", 1)[-1])
        assert named, f"docs/runbook.md names no test for: {row[:100]}"
        for path, name in named:
            source = (tests / path).read_text() if (tests / path).is_file() else ""
            assert re.search(rf"^def {name}\(", source, re.M), f"docs/runbook.md names {path}::{name}, not defined"
