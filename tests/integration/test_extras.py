"""The heavy dependencies are extras: without one, the feature that needs it says which, in one line.

Each case runs fairwin in a fresh interpreter in which the extra's module cannot be
imported (``sys.modules[name] = None`` makes ``import name`` fail as if it were not
installed), so the rest of the process is as a user without that extra has it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BLOCKED = """
import sys
for name in {modules!r}:
    sys.modules[name] = None
from fairwin.cli import main
sys.exit(main({argv!r}))
"""


def _without(modules: list[str], argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    code = BLOCKED.format(modules=modules, argv=argv)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize(
    ("extra", "modules", "argv"),
    [
        ("export", ["pyarrow"], ["export", "{window}", "--out", "{tmp}/export"]),
        ("postgres", ["psycopg"], ["archive", "stats", "--archive", "postgresql://nobody@127.0.0.1:1/none"]),
    ],
)
def test_a_command_that_needs_a_missing_extra_names_it_in_one_line(
    extra: str, modules: list[str], argv: list[str], tmp_path: Path
) -> None:
    window = tmp_path / "w"
    window.mkdir()
    done = _without(modules, [a.format(window=window, tmp=tmp_path) for a in argv], tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"pip install 'fairwin[{extra}]'" in done.stderr and modules[0] in done.stderr, done.stderr


IMPORT = """
import sys
sys.modules[{blocked!r}] = None
import fairwin
from fairwin.errors import MissingExtraError
assert fairwin.decide is not None and fairwin.load_plan is not None  # what is local loads without it
try:
    import {module}
except MissingExtraError as exc:
    print(exc)
    sys.exit(0)
sys.exit("{module} imported without {blocked}")
"""


@pytest.mark.parametrize(
    ("module", "blocked", "needed_by"),
    [
        ("fairwin.launch.ssh", "asyncssh", "a role, production or the hardware's lock on another host"),
        ("fairwin.archive.postgres", "psycopg", "a PostgreSQL archive"),
        ("fairwin.report.plots", "matplotlib", "report.html's figures and `compare --plot`"),
        ("fairwin.report.export", "pyarrow", "`fairwin export` (CSV and Parquet)"),
    ],
)
def test_each_extra_is_needed_only_where_it_is_used(module: str, blocked: str, needed_by: str) -> None:
    code = IMPORT.format(module=module, blocked=blocked)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    extra = {"asyncssh": "ssh", "psycopg": "postgres", "matplotlib": "report", "pyarrow": "export"}[blocked]
    assert done.stdout.strip() == (
        f"{needed_by} needs fairwin's '{extra}' extra ({blocked} is not installed): pip install 'fairwin[{extra}]'"
    )
