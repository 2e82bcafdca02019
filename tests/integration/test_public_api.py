"""The main scenarios through ``fairwin.*`` alone, as a script that adopts the library would write them.

Run a window, decide it again from its files, read the control archive, and catch the
errors a script handles: nothing here imports an internal module.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import get_args

import pytest

import fairwin
from tests.conftest import PlanFactory


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, fairwin.WindowResult]:
    from tests.conftest import plan_factory

    plan = plan_factory(tmp_path_factory.mktemp("api"))()
    lines: list[str] = []
    result = asyncio.run(fairwin.run_window(fairwin.load_plan(plan), "controlled", say=lines.append))
    assert lines, "a window says what it does"
    return plan, result


def test_a_window_run_through_the_api_decides_and_redecides_the_same(
    ran: tuple[Path, fairwin.WindowResult],
) -> None:
    _, result = ran
    assert isinstance(result.window, fairwin.WindowDir)
    assert result.decision.verdict in get_args(fairwin.Verdict)
    assert all(isinstance(cell, fairwin.CellDecision) for cell in result.decision.cells)
    assert result.rows and all(isinstance(row, fairwin.PooledRow) for row in result.rows)
    again = fairwin.decide_window(result.window.path)
    assert isinstance(again, fairwin.Recomputed)
    assert [d.verdict for d in again.decisions] == [result.decision.verdict]
    assert again.decisions[0].cells == result.decision.cells


def test_the_archive_read_through_the_api_holds_the_windows_control_starts(
    ran: tuple[Path, fairwin.WindowResult],
) -> None:
    plan, result = ran
    snapshot = fairwin.read_archive(plan.parent / "windows" / "control-archive.jsonl")
    assert isinstance(snapshot, fairwin.Snapshot) and snapshot.problems == ()
    controls = {row.start for row in result.rows if row.kind == "control"}
    mine = [row for row in snapshot.rows if row.window_id == result.window.window_id]
    assert all(isinstance(row, fairwin.ArchiveRow) for row in mine)
    assert {row.start for row in mine} == controls


def test_the_errors_a_script_catches_are_exported_with_their_exit_codes(tmp_path: Path, make_plan: PlanFactory) -> None:
    with pytest.raises(fairwin.PlanError, match="no such plan file") as missing:
        fairwin.load_plan(tmp_path / "nope.toml")
    assert isinstance(missing.value, fairwin.InputError) and missing.value.exit_code == 2
    not_a_window = tmp_path / "file"
    not_a_window.write_text("{}")
    with pytest.raises(fairwin.InputError):
        fairwin.decide_window(not_a_window)
    with pytest.raises(fairwin.InputError, match="no mode 'no-such-mode'"):
        asyncio.run(fairwin.run_window(fairwin.load_plan(make_plan()), "no-such-mode"))
    codes = {
        name: getattr(fairwin, name).exit_code
        for name in fairwin.__all__
        if name.endswith(("Error", "Refused", "Failed", "Interrupted"))
    }
    assert codes["WaveError"] == codes["WindowError"] == 3 and fairwin.LoadError is fairwin.WaveError
    assert (codes["GateRefused"], codes["RehearsalFailed"], codes["RestoreFailed"], codes["Interrupted"]) == (
        4,
        5,
        6,
        130,
    )


def test_a_windows_records_read_through_the_api_are_the_ones_it_wrote(
    ran: tuple[Path, fairwin.WindowResult],
) -> None:
    _, result = ran
    files = fairwin.WindowDir.at(result.window.path)
    status = fairwin.read_record(files.status, fairwin.WindowStatus)
    assert status.state == "complete" and status.verdict == result.decision.verdict
    manifest = fairwin.read_record(files.manifest, fairwin.WindowManifest)
    assert [s.start for s in manifest.starts][: len({r.start for r in result.rows})] == sorted(
        {r.start for r in result.rows}, key=lambda s: int(s[1:])
    )
    for start in {r.start for r in result.rows}:
        receipt = fairwin.read_record(files.start_receipt(start), fairwin.StartReceipt)
        assert receipt.start == start and receipt.pooled_rows == sum(r.start == start for r in result.rows)
    pooled = fairwin.read_records(files.pooled, fairwin.PooledRow)
    assert pooled == result.rows and all(isinstance(r, fairwin.Record) for r in pooled)
