"""`fairwin plan check` warns, with audited rates, when the rule misses its error targets at the archive's noise."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from fairwin.archive import ArchivedRepeat, ArchiveRow, open_archive
from fairwin.archive.window_rows import planned_match
from fairwin.plan.site import Site
from tests.conftest import PlanFactory
from tests.integration.helpers import fairwin
from tests.ports import free_port


def noisy_archive(plan: Path) -> None:
    """Six control starts of short-b1, keyed as this plan's controlled windows will be, whose means differ launch
    to launch by about 12 %, repeats by about 1 %; and six more of another role, which must not count."""
    from fairwin.plan import load_plan

    key = planned_match(Site.of(load_plan(plan)), "controlled", "A", "short-b1")
    means = [1000.0, 1150.0, 880.0, 1070.0, 940.0, 1200.0]
    rows = [
        ArchiveRow(
            window_id=f"w{i // 2}",
            time=float(i),
            commit=None,
            mode="controlled",
            role=role,
            start=("s1", "s3")[i % 2],
            cell="short-b1",
            max_tokens=key.max_tokens,
            clock_cap_mhz=None,
            repeats=[ArchivedRepeat(repeat=r, pooled_rate_tps=m * f) for r, f in enumerate((0.99, 1.0, 1.01), 1)],
            production_commit=key.production_commit,
            prompt_tokens=key.prompt_tokens,
            concurrency=key.concurrency,
            temperature=key.temperature,
            hosts=list(key.hosts or ()),
        )
        for i, m in enumerate(means)
        for role in ("A", "other")
    ]
    open_archive(plan.parent / "windows" / "control-archive.jsonl").append(rows)


def test_plan_check_warns_when_the_rule_misses_its_targets(
    make_plan: PlanFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FAIRWIN_AUDIT_TRIALS")  # the suite's smaller audit off: the default's 1,000 windows
    plan = make_plan()
    noisy_archive(plan)
    done = fairwin("plan", "check", str(plan))
    assert done.returncode == 0, done.stderr
    assert "OK (sha256" in done.stdout
    warning = done.stderr.strip()
    assert warning.startswith("warning: cell short-b1: at the archive's noise (repeat cv ")
    assert "over 6 control starts) win2-v1 calls a no-change window WIN " in warning
    assert "(targets: at most 2.5 % and 5 %; 1000 simulated windows)" in warning


def test_a_bad_audit_trials_setting_is_one_line_before_anything_runs(
    make_plan: PlanFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = make_plan()
    for value in ("ten", "99"):
        monkeypatch.setenv("FAIRWIN_AUDIT_TRIALS", value)
        done = fairwin("run", str(plan), "--mode", "controlled")
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert f"FAIRWIN_AUDIT_TRIALS='{value}' is not a whole number of at least 100" in done.stderr
        assert not (plan.parent / "windows").exists()


def test_plan_check_is_quiet_for_a_rule_that_meets_them(make_plan: PlanFactory) -> None:
    plain = make_plan(window={"rule": "win2-v1"})  # no archive yet: nothing to audit against, nothing said
    assert fairwin("plan", "check", str(plain)).stderr == ""
    plan = make_plan(window={"rule": "win2-launch-v1"})
    noisy_archive(plan)
    done = fairwin("plan", "check", str(plan))
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_a_plan_with_its_own_role_names_is_told_how_to_make_a_mode_and_then_runs_it_without_mode(
    make_plan: PlanFactory,
) -> None:
    sim_roles = tomllib.loads(make_plan().read_text())["roles"]
    roles = {"base": sim_roles["A"], "spec": sim_roles["B"]}
    plan = make_plan(roles=roles, name="own.toml")
    checked = fairwin("plan", "check", str(plan))
    assert checked.returncode == 0 and "modes (none)" in checked.stdout
    assert "warning: no mode can run: declare [modes.NAME] with control and candidate roles" in checked.stderr
    shown = fairwin("plan", "show", str(plan))
    assert shown.returncode == 2
    assert (
        "mode 'controlled' needs role(s) A, B, which the plan does not declare; add [roles.A], or declare "
        "[modes.NAME] with control and candidate among roles base, spec"
    ) in shown.stderr
    mine = {"control": "base", "candidate": "spec"}
    plan = make_plan(roles=roles, modes={"mine": mine}, name="own.toml")
    checked = fairwin("plan", "check", str(plan))
    assert checked.returncode == 0 and "modes mine;" in checked.stdout and "warning" not in checked.stderr
    shown = fairwin("plan", "show", str(plan))  # no --mode: the plan's only mode
    assert shown.returncode == 0 and "mode mine: control base, candidate spec" in shown.stdout
    plan = make_plan(roles=roles, modes={"mine": mine, "other": {"control": "spec", "candidate": "base"}})
    shown = fairwin("plan", "show", str(plan))
    assert shown.returncode == 2 and "the plan has modes mine, other; name one with --mode" in shown.stderr


def test_plan_check_counts_every_prompt_a_cell_sends_and_names_each_short_one(
    make_plan: PlanFactory, tmp_path: Path
) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(["the a of"], trainers.WordLevelTrainer(special_tokens=["<unk>"]))
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    plan = make_plan()
    fine = fairwin("plan", "check", str(plan), "--tokenizer", str(path))
    assert fine.returncode == 0, fine.stderr
    assert "prompts: all " in fine.stdout and "long enough (shortest, in tokens: short-b1 64)" in fine.stdout
    long = fairwin("plan", "check", str(plan), "--tokenizer", str(path), "--set", "cells.short-b1.prompt_tokens=20000")
    assert long.returncode == 2
    short = [line for line in long.stderr.splitlines() if line.startswith("cell short-b1: ")]
    assert short and all("tokens, the cell wants 20000 (tolerance" in line for line in short)
    assert f"of {len(short)} prompts are too short for their cell" in long.stderr.splitlines()[-1]
    assert "rebuild those families from longer text (`fairwin prompts --min-chars N`)" in long.stderr
    assert long.stdout == ""  # no OK above a refusal
    # A server that does not answer: one line naming it, and no OK printed first.
    unanswered = fairwin("plan", "check", str(plan), "--tokenize-url", f"http://127.0.0.1:{free_port()}")
    assert (unanswered.returncode, unanswered.stdout) == (3, "")
    assert unanswered.stderr.startswith("fairwin: error: tokenize: no answer from http://127.0.0.1:")


def test_a_plan_with_several_problems_names_the_first_and_lists_the_rest_with_verbose(make_plan: PlanFactory) -> None:
    plan = make_plan()
    text = plan.read_text().replace("repeats = 3", 'repeats = "three"').replace("max_tokens = 48", "max_tokens = 1")
    plan.write_text(text.replace('served_model = "tiny"', 'served_model = "tiny"\nnice = 25', 1))
    quiet = fairwin("plan", "check", str(plan))
    assert quiet.returncode == 2 and len(quiet.stderr.splitlines()) == 1
    assert quiet.stderr.rstrip().endswith("(+2 more; -v lists them)"), quiet.stderr
    listed = fairwin("-v", "plan", "check", str(plan))
    assert listed.returncode == 2 and listed.stderr.splitlines()[0] == quiet.stderr.splitlines()[0]
    also = sorted(line for line in listed.stderr.splitlines() if line.startswith("  also: "))
    assert len(also) == 2, listed.stderr
    assert [line.split(":")[1].strip() for line in also] == sorted(
        key for key in ("window.repeats", "roles.A.nice", "cells.short-b1.max_tokens") if key not in quiet.stderr
    )
