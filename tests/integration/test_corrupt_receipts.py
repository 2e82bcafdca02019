"""Every receipt kind, damaged every way, on the command that reads it: exit 2, one line naming it, nothing touched.

Real receipts are made once (an admission, a carry on a real git repository, a gate run,
a rehearsal against `fairwin sim`); each case damages a copy and runs the command in-process.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fairwin.cli import main
from fairwin.files import sha256_file
from tests.conftest import sim_role, to_toml, write_family
from tests.damage import DAMAGE, flip_a_byte
from tests.integration.helpers import SimProcess


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@dataclass(frozen=True)
class Made:
    root: Path
    plan: Path
    qualified: str

    def receipt(self, kind: str) -> Path:
        return {
            "admission": self.root / "admission.json",
            "carry": self.root / "carried.json",
            "gate-run": self.root / "gate.json",
            "rehearsal": self.root / "rehearsal" / "rehearsal.json",
        }[kind]

    def read_with(self, kind: str, receipt: Path) -> list[str]:
        """The command whose first act is reading this receipt kind."""
        plan = str(self.plan)
        return {
            "admission": [
                "qualify",
                "carry",
                "--plan",
                plan,
                "--receipt",
                str(receipt),
                "--qualified-commit",
                self.qualified,
                "--out",
                str(self.root / "new-carry.json"),
            ],
            "carry": ["run", plan, "--qualification", str(receipt)],
            "gate-run": ["run", plan, "--require-gate", str(receipt)],
            "rehearsal": ["run", plan, "--require-rehearsal", str(receipt.parent)],
        }[kind]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    root = tmp_path_factory.mktemp("receipts")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "bench").mkdir()
    (repo / "bench" / "measure.py").write_text("X = 1\n")
    (repo / "kernel.bin").write_bytes(b"\x01")
    git(repo, "add", "bench")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "q")
    qualified = git(repo, "rev-parse", "HEAD")
    sim = SimProcess("--model", "prod", "--spec-tokens", "2", "--acceptance", "0.5")
    try:
        sim.wait_healthy()
        families = {"prose": write_family(root, "prose")}
        plan = {
            "window": {"output_dir": "windows", "repeats": 2, "idle_check_s": 0},
            "budget": {"startup_s": 1, "stop_s": 1, "decode_ms_per_token": 2},
            "roles": {"A": sim_role(model="prod"), "B": sim_role(model="prod")},
            "families": families,
            "cells": {"c": {"families": ["prose"], "prompt_tokens": 64, "max_tokens": 8, "streams_per_wave": 1}},
            "qualification": {"repo": str(repo), "measurement_layer": ["bench/*"]},
            "rehearsal": {"url": sim.url},
        }
        (root / "plan.toml").write_text(to_toml(plan))
        admission = root / "admission.json"
        admission.write_text(
            f'{{"format": "fairwin.admission/1", "verdict": "QUALIFIED", "commit": "{qualified}", '
            f'"artifacts": {{"kernel.bin": "{sha256_file(repo / "kernel.bin")}"}}}}'
        )
        assert (
            main(
                [
                    "qualify",
                    "carry",
                    "--plan",
                    str(root / "plan.toml"),
                    "--receipt",
                    str(admission),
                    "--qualified-commit",
                    qualified,
                    "--out",
                    str(root / "carried.json"),
                ]
            )
            == 0
        )
        # (--out: the old spelling of --to, kept as a hidden alias)
        assert (
            main(
                [
                    "gate",
                    "run",
                    "--name",
                    "unit",
                    "--out",
                    str(root / "gate.json"),
                    "--repo",
                    str(repo),
                    "--artifact",
                    str(repo / "kernel.bin"),
                    "--",
                    sys.executable,
                    "-c",
                    "pass",
                ]
            )
            == 0
        )
        assert main(["rehearse", str(root / "plan.toml"), "--model", "prod", "--out", str(root / "rehearsal")]) == 0
        yield Made(root=root, plan=root / "plan.toml", qualified=qualified)
    finally:
        sim.stop()


def digests(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): sha256_file(p) for p in sorted(directory.rglob("*")) if p.is_file()}


KINDS = ("admission", "carry", "gate-run", "rehearsal")


def test_the_undamaged_receipts_are_read(made: Made) -> None:
    # The same readers accept the receipts as written: damage is what the cases below add.
    from fairwin.gates.correctness import require_gate
    from fairwin.gates.qualify import require_carry
    from fairwin.gates.rehearsal import require_rehearsal
    from fairwin.plan import load_plan

    carried = require_carry(made.receipt("carry"), made.qualified, load_plan(made.plan).plan.qualification)
    assert carried.verdict == "CARRIED"
    assert require_gate(made.receipt("gate-run"), made.qualified, carried.artifacts).verdict == "PASS"
    assert require_rehearsal(made.receipt("rehearsal").parent, load_plan(made.plan)).verdict == "PASS"
    assert main(made.read_with("admission", made.receipt("admission"))) == 0


@pytest.mark.parametrize("damage", [*DAMAGE], ids=lambda d: d.__name__)
@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_receipt_is_one_line_and_exit_2(
    made: Made, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, damage: Callable[[Path], None]
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(made.root, copy, ignore=shutil.ignore_patterns("repo", "new-carry.json"))  # repo: named by path
    moved = Made(root=copy, plan=copy / "plan.toml", qualified=made.qualified)
    receipt = moved.receipt(kind)
    damage(receipt)
    before = digests(copy)
    assert main(moved.read_with(kind, receipt)) == 2
    out, err = capsys.readouterr()
    line = err.strip()
    assert "\n" not in line and "Traceback" not in err and out == "", err
    assert line.startswith("fairwin: error:") and str(receipt) in line, line
    assert digests(copy) == before  # nothing written, nothing changed
    assert not (copy / "windows").exists() and not (copy / "new-carry.json").exists()


def test_flipping_a_byte_of_a_sealed_receipt_says_it_was_edited(
    made: Made, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    receipt = tmp_path / "gate.json"
    shutil.copyfile(made.receipt("gate-run"), receipt)
    text = receipt.read_text()
    receipt.write_text(text.replace('"PASS"', '"PASs"'))
    assert main(made.read_with("gate-run", receipt)) == 2
    assert "edited after writing" in capsys.readouterr().err
    flip_a_byte(receipt)  # and anything else: one line, exit 2
    assert main(made.read_with("gate-run", receipt)) == 2
