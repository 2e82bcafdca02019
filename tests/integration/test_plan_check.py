"""`fairwin plan check` warns, with audited rates, when the rule misses its error targets at the archive's noise."""

from __future__ import annotations

from pathlib import Path

from fairwin.archive import ArchivedRepeat, ArchiveRow, append_controls
from tests.conftest import PlanFactory
from tests.integration.helpers import fairwin


def noisy_archive(path: Path) -> None:
    """Six control starts of short-b1 whose means differ launch to launch by about 12 %, repeats by about 1 %."""
    means = [1000.0, 1150.0, 880.0, 1070.0, 940.0, 1200.0]
    rows = [
        ArchiveRow(
            window_id=f"w{i // 2}", time=0.0, commit=None, mode="controlled", role="A", start=("s1", "s3")[i % 2],
            cell="short-b1", max_tokens=48, clock_cap_mhz=None,
            repeats=[ArchivedRepeat(repeat=r, pooled_rate_tps=m * f) for r, f in enumerate((0.99, 1.0, 1.01), 1)],
        )
        for i, m in enumerate(means)
    ]  # fmt: skip
    append_controls(path, rows)


def test_plan_check_warns_when_the_rule_misses_its_targets(make_plan: PlanFactory) -> None:
    plan = make_plan()
    noisy_archive(plan.parent / "windows" / "control-archive.jsonl")
    done = fairwin("plan", "check", str(plan))
    assert done.returncode == 0, done.stderr
    assert "OK (sha256" in done.stdout
    warning = done.stderr.strip()
    assert warning.startswith("warning: cell short-b1: at the archive's noise (repeat cv ")
    assert "over 6 control starts) win2-v1 calls a no-change window WIN " in warning
    assert "(targets: at most 2.5 % and 5 %; 1000 simulated windows)" in warning


def test_plan_check_is_quiet_for_a_rule_that_meets_them(make_plan: PlanFactory) -> None:
    plain = make_plan(window={"rule": "win2-v1"})  # no archive yet: nothing to audit against, nothing said
    assert fairwin("plan", "check", str(plain)).stderr == ""
    plan = make_plan(window={"rule": "win2-launch-v1"})
    noisy_archive(plan.parent / "windows" / "control-archive.jsonl")
    done = fairwin("plan", "check", str(plan))
    assert done.returncode == 0 and done.stderr == "", done.stderr
