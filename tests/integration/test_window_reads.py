"""A look reads each of the window's files once: window.json, the pooled rows, the journal, each start's receipt.

Counted with an audit hook on every file opened for reading while a look runs, on a window a sim run left.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from fairwin.archive import read_archive
from fairwin.decision import get_rule
from fairwin.directory.layout import WindowDir
from fairwin.plan import load_plan
from fairwin.plan.site import Site
from fairwin.verdict.stored import Deciding
from fairwin.window.looks import look_now
from fairwin.window.preflight import planned_keys
from fairwin.window.run import run_window
from tests.conftest import PlanFactory

_counting: list[Counter[str]] = []


def _count_reads(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _counting or not isinstance(args[0], str | bytes | os.PathLike):
        return
    mode, flags = args[1], args[2]
    reading = ("r" in mode and "+" not in mode) if isinstance(mode, str) else (flags & (os.O_WRONLY | os.O_RDWR)) == 0
    if reading:
        _counting[-1][os.fsdecode(args[0])] += 1


sys.addaudithook(_count_reads)  # for the whole process (a hook cannot be removed); it counts only when asked


def test_a_look_reads_each_of_the_windows_files_once(make_plan: PlanFactory, tmp_path: Path) -> None:
    plan = make_plan(window={"repeats": 2})
    loaded = load_plan(plan)
    result = asyncio.run(run_window(loaded, "controlled"))
    window: WindowDir = result.window
    # The sequential default's looks, over this window's three starts and the archive it wrote.
    rule = get_rule("win2-seq-v2")
    snapshot = read_archive(Path(loaded.output_dir()) / "control-archive.jsonl")
    deciding = Deciding(
        "controlled", result.decision.order, rule, snapshot, planned_keys(Site.of(loaded), "controlled", None), None
    )
    _counting.append(Counter())
    try:
        look_now(loaded, window, deciding)
    finally:
        reads = _counting.pop()
    mine = {
        Path(path).resolve().relative_to(window.path.resolve()).as_posix(): n
        for path, n in reads.items()
        if Path(path).resolve().is_relative_to(window.path.resolve())
    }
    expected = {"window.json", "pooled.jsonl", "journal.jsonl", *(f"starts/s{i}/start.json" for i in (1, 2, 3))}
    assert set(mine) == expected and set(mine.values()) == {1}, mine
