"""Every test's asserts can fail: none asserts the bare result of a command helper (a completed process is always
truthy), and none has a comment that swallowed its comparison (`assert run(...)  # note.returncode == 0`, which
the formatter makes of a comparison written after a comment)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

#: A comment holding what reads as the tail of a comparison: an attribute, then an operator, then an operand.
SWALLOWED = re.compile(r"[\w\])]\.\w+\s*(==|!=|<=|>=|<|>|\bin\b|\bis\b)\s*\S")


def command_helpers(files: list[Path]) -> set[str]:
    """The test helpers that return a completed process (by their annotation), and subprocess.run."""
    found = {"subprocess.run"}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.returns and "CompletedProcess" in ast.unparse(node.returns):
                found.add(node.name)
    return found


def cannot_fail(path: Path, helpers: set[str], root: Path = TESTS.parent) -> list[str]:
    """Each assert of the file that cannot fail, as 'FILE:LINE: why'."""
    source = path.read_text()
    comments = {
        token.start[0]: token.string
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    }
    where = path.relative_to(root)
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Assert):
            continue
        if isinstance(node.test, ast.Call):
            called = ast.unparse(node.test.func)
            if called in helpers or called.rsplit(".", 1)[-1] in helpers - {"subprocess.run"}:
                found.append(f"{where}:{node.lineno}: asserts {called}(...)'s completed process, always truthy")
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            comment = comments.get(line)
            if comment is not None and SWALLOWED.search(comment):
                found.append(f"{where}:{line}: a comment swallowed the comparison: {comment!r}")
    return found


def test_no_assert_in_the_suite_cannot_fail() -> None:
    files = sorted(TESTS.rglob("*.py"))
    helpers = command_helpers(files)
    assert "fairwin" in helpers  # the integration tests' own: it returns a completed process
    assert [line for path in files for line in cannot_fail(path, helpers)] == []


def test_it_finds_an_assert_of_a_bare_completed_process_and_a_swallowed_comparison(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import subprocess\n\n"
        "def fairwin(*args: str) -> subprocess.CompletedProcess[str]: ...\n\n"
        "def test_it() -> None:\n"
        "    assert fairwin(\n"
        '        "archive", "export"\n'
        "    )  # the older positional form.returncode == 0\n"
        '    assert subprocess.run(["true"])\n'
        '    assert fairwin("x").returncode == 0  # exit 0: all went well\n'
    )
    assert cannot_fail(sample, command_helpers([sample]), tmp_path) == [
        "test_sample.py:6: asserts fairwin(...)'s completed process, always truthy",
        "test_sample.py:8: a comment swallowed the comparison: '# the older positional form.returncode == 0'",
        "test_sample.py:9: asserts subprocess.run(...)'s completed process, always truthy",
    ]
