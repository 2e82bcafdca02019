"""Windows made once per test run (per xdist worker) and only read by the tests that share them.

No test changes them. Sharing is for tests whose point
is what is done with a finished window (its report, exports, decision, the archive it grew),
not how a window runs: those have windows of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import plan_factory, sim_role
from tests.integration.helpers import fairwin

#: The xdist group of every test that reads ``two_windows``: one worker makes them, once.
TWO_WINDOWS = "two_windows"


@dataclass(frozen=True)
class FinishedWindows:
    plan: Path
    windows: list[Path]  # in the order they ran

    @property
    def archive(self) -> Path:
        return self.plan.parent / "windows" / "control-archive.jsonl"


@pytest.fixture(scope="session")
def two_windows(tmp_path_factory: pytest.TempPathFactory) -> FinishedWindows:
    """Two controlled win2-v1 windows of one plan, two repeats each, sharing an archive: a deciding cell
    (short-b1) and a reported one (a-long, ``decision = false``), two families, one stream a wave."""
    directory = tmp_path_factory.mktemp("two-windows")
    cell = {"families": ["prose", "code"], "max_tokens": 32, "streams_per_wave": 1}
    cells = {"short-b1": {**cell, "prompt_tokens": 64}, "a-long": {**cell, "prompt_tokens": 256, "decision": False}}
    roles = {
        "A": sim_role("--ms-per-round", "2", model="shared"),
        "B": sim_role("--ms-per-round", "2", "--spec-tokens", "4", "--acceptance", "0.8,0.6,0.5,0.4", model="shared"),
    }
    plan = plan_factory(directory)(roles=roles, cells=cells, window={"repeats": 2, "warmup_waves_max": 1})
    for _ in range(2):
        done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
        assert done.returncode == 0, done.stderr
    windows = sorted(p for p in (directory / "windows").iterdir() if p.is_dir() and not p.name.startswith("."))
    return FinishedWindows(plan, windows)
