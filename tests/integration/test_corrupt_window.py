"""Every way a stored window's files can be damaged reaches the user as one line and exit 2, never a verdict.

One real window (against `fairwin sim`), then, for each file `fairwin decide WINDOW`
reads and each kind of damage, a copy of the directory is damaged and decided
in-process: exit 2, one line naming the file, no traceback, nothing written.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from fairwin.cli import main
from fairwin.files import sha256_file
from tests.conftest import sim_role, to_toml, write_family
from tests.damage import DAMAGE, drop_a_field, flip_a_byte
from tests.integration.helpers import fairwin

FILES = ("status.json", "window.json", "context.json", "pooled.jsonl", "decision.json")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("corrupt")
    families = {"prose": write_family(directory, "prose"), "code": write_family(directory, "code")}
    plan = {
        "window": {"output_dir": "windows", "repeats": 2, "idle_check_s": 0, "rule": "win2-v1"},
        "budget": {"startup_s": 1, "stop_s": 1, "decode_ms_per_token": 2},
        "roles": {"A": sim_role("--ms-per-round", "2", model="corrupt-a")},
        "modes": {"aa": {"control": "A", "candidate": "A"}},
        "families": families,
        "cells": {"c": {"families": ["prose", "code"], "prompt_tokens": 64, "max_tokens": 16, "streams_per_wave": 1}},
    }
    (directory / "plan.toml").write_text(to_toml(plan))
    done = fairwin("run", str(directory / "plan.toml"), "--mode", "aa", "--quiet")
    assert done.returncode == 0, done.stderr
    (window,) = [p for p in (directory / "windows").iterdir() if p.is_dir()]
    return window


def digests(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): sha256_file(p) for p in sorted(directory.rglob("*")) if p.is_file()}


def test_the_undamaged_window_recomputes_to_its_record(finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decide", str(finished), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["decisions"] == [json.loads((finished / "decision.json").read_text())]
    assert "note: recomputed: identical to the recorded decision" in err


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", FILES)
def test_damage_is_one_line_and_exit_2(
    finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, damage: Callable[[Path], None]
) -> None:
    copy = tmp_path / finished.name
    shutil.copytree(finished, copy)
    damage(copy / name)
    before = digests(copy)
    code = main(["decide", str(copy)])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert out == "" and err.count("\n") == 1 and err.startswith("fairwin: error: "), err
    assert name in err or "not complete" in err, err
    assert digests(copy) == before  # nothing written or changed


def test_budget_history_reads_the_window(finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["budget", "history", "--dir", str(finished.parent)]) == 0
    out, _ = capsys.readouterr()
    assert finished.name in out


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda d: d.__name__)
def test_a_damaged_budget_record_is_one_line_and_exit_2(
    finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Callable[[Path], None]
) -> None:
    copy = tmp_path / "windows" / finished.name
    shutil.copytree(finished, copy)
    damage(copy / "budget.json")
    code = main(["budget", "history", "--dir", str(copy.parent)])
    out, err = capsys.readouterr()
    if damage is flip_a_byte and code == 0:
        # A flipped digit in a step time is still a valid record (nothing seals budget.json); it must still print.
        assert finished.name in out and err == ""
        return
    assert code == 2 and out == "" and err.count("\n") == 1 and "budget.json" in err, (code, err)


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", ["status.json", "starts/s1/start.json", "waves.jsonl"])
def test_a_damaged_earlier_window_calibrates_nothing_and_is_named(
    finished: Path, tmp_path: Path, name: str, damage: Callable[[Path], None]
) -> None:
    from fairwin.gates.calibration import calibrate

    whole = calibrate(finished.parent)
    assert whole.unreadable == [] and whole.startup_s and whole.wave_s
    copy = tmp_path / "windows" / finished.name
    shutil.copytree(finished, copy)
    damage(copy / name)
    found = calibrate(copy.parent)
    if not found.unreadable:
        # Still a valid record for what calibration reads: a flipped digit of a time, or a dropped field it
        # does not read (the last key: start.json's warmup, a wave's label). It then calibrates, same shape.
        assert damage in (flip_a_byte, drop_a_field), name
        assert found.startup_s.keys() == whole.startup_s.keys()
        return
    (reason,) = found.unreadable
    assert reason.startswith(finished.name) and Path(name).name in reason, reason
    assert not found.startup_s and not found.stop_s and not found.wave_s  # nothing from half a window
