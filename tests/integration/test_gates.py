"""The gates on real git repositories and real subprocesses; nothing is touched when one refuses."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fairwin.errors import GateRefused
from fairwin.files import sha256_file
from fairwin.gates.sequence import GateInputs, run_gates
from fairwin.plan import load_plan
from fairwin.window.run import run_window
from tests.conftest import PlanFactory
from tests.integration.helpers import fairwin

RUNTIME = "def serve(port):\n    return port\n"
MEASURE = """class Runner:
    def launch(self, argv):
        # start the server
        return list(argv)


def pool(rows):
    return sum(rows)
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path)


def make_repo(tmp_path: Path) -> Path:
    """A git work tree with a qualified commit and an untracked build output."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    commit(
        repo,
        {
            "src/runtime.py": RUNTIME,
            "bench/measure.py": MEASURE,
            "bench/cells.py": "CELLS = 2\n",
            "bench/frozen/order.txt": "a b c\n",
            ".gitignore": "*.bin\n",
        },
        "qualified",
    )
    (repo / "kernel.bin").write_bytes(b"\x01\x02")  # a build output, not tracked
    return repo


QUALIFICATION = {
    "measurement_layer": ["bench/*"],
    "carried_files": ["bench/cells.py"],
    "carried_prefixes": ["bench/frozen/"],
    "carried_units": ["bench/measure.py::Runner.launch"],
}


def plan_with_qualification(make_plan: PlanFactory, repo: Path) -> Path:
    plan = make_plan()
    lines = ["[qualification]", f'repo = "{repo}"'] + [f"{k} = {json.dumps(v)}" for k, v in QUALIFICATION.items()]
    plan.write_text(plan.read_text() + "\n" + "\n".join(lines) + "\n")
    return plan


def admission(tmp_path: Path, repo: Path, q: str, verdict: str = "QUALIFIED") -> Path:
    path = tmp_path / "admission.json"
    artifacts = {"kernel.bin": sha256_file(repo / "kernel.bin")}
    path.write_text(
        json.dumps({"format": "fairwin.admission/1", "verdict": verdict, "commit": q, "artifacts": artifacts})
    )
    return path


def carry(plan: Path, receipt: Path, q: str, out: Path):  # type: ignore[no-untyped-def]
    return fairwin(
        "qualify", "carry", "--plan", str(plan), "--receipt", str(receipt), "--qualified-commit", q, "--to", str(out)
    )


CHANGES = {
    "measurement layer only": ({"bench/measure.py": MEASURE + "\n\ndef extra():\n    return 1\n"}, None),
    "comment inside a unit": ({"bench/measure.py": MEASURE.replace("# start the server", "# launch it")}, None),
    "byte outside the layer": ({"src/runtime.py": RUNTIME + "\n"}, "layer differ: src/runtime.py"),
    "unit code": ({"bench/measure.py": MEASURE.replace("list(argv)", "tuple(argv)")}, "Runner.launch changed"),
    "carried file in the layer": ({"bench/cells.py": "CELLS = 3\n"}, "differ: bench/cells.py"),
    "carried prefix": ({"bench/frozen/order.txt": "c b a\n"}, "differ: bench/frozen/order.txt"),
    "new file outside the layer": ({"src/new.py": "X = 1\n"}, "differ: src/new.py"),
}


@pytest.mark.parametrize("case", sorted(CHANGES))
def test_qualification_carry(make_plan: PlanFactory, repo: Path, tmp_path: Path, case: str) -> None:
    q = git(repo, "rev-parse", "HEAD")
    files, refusal = CHANGES[case]
    h = commit(repo, files, case)
    out = tmp_path / "carried.json"
    done = carry(plan_with_qualification(make_plan, repo), admission(tmp_path, repo, q), q, out)
    receipt = json.loads(out.read_text())
    assert receipt["qualified_commit"] == q and receipt["head"] == h
    if refusal is None:
        assert done.returncode == 0, done.stderr
        assert receipt["verdict"] == "CARRIED" and receipt["units"]["bench/measure.py::Runner.launch"]["identical"]
    else:
        assert done.returncode == 4
        assert receipt["verdict"] == "REFUSED"
        assert done.stderr.count("\n") == 1 and refusal in done.stderr, done.stderr


def test_carry_refuses_an_admission_that_is_not_qualified(make_plan: PlanFactory, repo: Path, tmp_path: Path) -> None:
    q = git(repo, "rev-parse", "HEAD")
    done = carry(
        plan_with_qualification(make_plan, repo), admission(tmp_path, repo, q, "REJECTED"), q, tmp_path / "c.json"
    )
    assert done.returncode == 4 and "verdict is 'REJECTED', not QUALIFIED" in done.stderr


def test_receipts_are_sealed(make_plan: PlanFactory, repo: Path, tmp_path: Path) -> None:
    q = git(repo, "rev-parse", "HEAD")
    out = tmp_path / "carried.json"
    assert carry(plan_with_qualification(make_plan, repo), admission(tmp_path, repo, q), q, out).returncode == 0
    doc = json.loads(out.read_text())
    doc["verdict"] = "CARRIED "  # edited after writing
    out.write_text(json.dumps(doc))
    plan = plan_with_qualification(make_plan, repo)
    done = fairwin("run", str(plan), "--qualification", str(out))
    assert done.returncode == 2 and "edited after writing" in done.stderr


def gate_run(repo: Path, out: Path, *command: str, artifact: str = "kernel.bin"):  # type: ignore[no-untyped-def]
    return fairwin(
        "gate",
        "run",
        "--name",
        "rng",
        "--to",
        str(out),
        "--artifact",
        str(repo / artifact),
        "--repo",
        str(repo),
        "--",
        *command,
    )


def test_gate_run_records_pass_and_fail(repo: Path, tmp_path: Path) -> None:
    done = gate_run(repo, tmp_path / "gate.json", sys.executable, "-c", "print('six tests passed')")
    assert done.returncode == 0, done.stderr
    receipt = json.loads((tmp_path / "gate.json").read_text())
    assert receipt["verdict"] == "PASS" and receipt["exit_status"] == 0
    assert receipt["commit"] == git(repo, "rev-parse", "HEAD")
    assert receipt["artifacts"] == {str(repo / "kernel.bin"): sha256_file(repo / "kernel.bin")}
    assert "six tests passed" in receipt["output_tail"] and (tmp_path / "gate.log").is_file()
    failed = gate_run(repo, tmp_path / "bad.json", sys.executable, "-c", "raise SystemExit(3)")
    assert failed.returncode == 4 and "gate rng FAILED (exit status 3)" in failed.stderr
    assert json.loads((tmp_path / "bad.json").read_text())["verdict"] == "FAIL"


def recording_launcher(events: list[str]):  # type: ignore[no-untyped-def]
    def launch(spec, log_path):  # type: ignore[no-untyped-def]
        events.append(f"launch {spec.role_name}")
        raise AssertionError("a gate refused, so nothing may be launched")

    return launch


def refused(plan: Path, inputs: GateInputs) -> str:
    events: list[str] = []
    with pytest.raises(GateRefused) as exc:
        asyncio.run(run_window(load_plan(plan), "controlled", launcher=recording_launcher(events), gates=inputs))
    assert events == []  # the launcher was never called
    assert not (plan.parent / "windows").exists()  # and no window was opened
    return str(exc.value)


def test_no_host_is_touched_when_a_gate_refuses(make_plan: PlanFactory, repo: Path, tmp_path: Path) -> None:
    q = git(repo, "rev-parse", "HEAD")
    plan = plan_with_qualification(make_plan, repo)
    carried = tmp_path / "carried.json"
    assert carry(plan, admission(tmp_path, repo, q), q, carried).returncode == 0
    gate = tmp_path / "gate.json"
    assert gate_run(repo, gate, sys.executable, "-c", "pass").returncode == 0
    # A gate receipt for a different artifact than the one qualified.
    (repo / "kernel.bin").write_text("rebuilt")
    other = tmp_path / "other.json"
    gate_run(repo, other, sys.executable, "-c", "pass")
    message = refused(plan, GateInputs(qualification=carried, gates=[other]))
    assert "artifact kernel.bin has sha256" in message and "not the one that was qualified" in message
    # A gate that needs the qualified artifacts but was given none.
    assert "needs --qualification" in refused(plan, GateInputs(gates=[gate]))
    # The commit moved on after the carry.
    commit(repo, {"bench/notes.txt": "x\n"}, "later")
    assert "run `fairwin qualify carry` again" in refused(plan, GateInputs(qualification=carried))
    # And the budget: a limit the window cannot fit.
    small = make_plan(name="small.toml")
    small.write_text(small.read_text().replace("decode_ms_per_token = 2", "decode_ms_per_token = 2\nlimit_min = 1"))
    assert "over the 1 min limit" in refused(small, GateInputs())


@pytest.mark.slow
def test_gates_pass_and_are_recorded_in_the_window(make_plan: PlanFactory, repo: Path, tmp_path: Path) -> None:
    q = git(repo, "rev-parse", "HEAD")
    plan = plan_with_qualification(make_plan, repo)
    carried, gate = tmp_path / "carried.json", tmp_path / "gate.json"
    assert carry(plan, admission(tmp_path, repo, q), q, carried).returncode == 0
    assert gate_run(repo, gate, sys.executable, "-c", "pass").returncode == 0
    done = fairwin("run", str(plan), "--qualification", str(carried), "--require-gate", str(gate), "--quiet")
    assert done.returncode == 0, done.stderr
    (window,) = [p for p in (plan.parent / "windows").iterdir() if p.is_dir()]
    gates = json.loads((window / "window.json").read_text())["gates"]
    assert gates["head"] == q and gates["qualification"]["path"] == str(carried) and len(gates["gates"]) == 1
    budget = json.loads((window / "budget.json").read_text())
    assert budget["estimate"]["measurement_end_s"] > 0 and budget["actual_s"]["start s3"] > 0
    history = fairwin("budget", "history", "--dir", str(plan.parent / "windows"))
    assert history.returncode == 0 and window.name in history.stdout
    # The next dry plan is calibrated from this window.
    shown = fairwin("plan", "show", str(plan)).stdout
    assert "role A start: measured: median" in shown and "cell short-b1: measured: median wave" in shown


def test_a_required_gate_cannot_be_skipped(make_plan: PlanFactory, repo: Path, tmp_path: Path) -> None:
    q = git(repo, "rev-parse", "HEAD")
    plan = plan_with_qualification(make_plan, repo)
    plan.write_text(plan.read_text() + '\n[gates]\nrequired = ["qualification", "gate:rng"]\n')
    assert "requires gate qualification" in refused(plan, GateInputs())
    carried = tmp_path / "carried.json"
    assert carry(plan, admission(tmp_path, repo, q), q, carried).returncode == 0
    message = refused(plan, GateInputs(qualification=carried))
    assert "requires gate gate:rng" in message and "fairwin gate run --name rng" in message
    other = tmp_path / "other.json"
    done = fairwin(
        "gate",
        "run",
        "--name",
        "lint",
        "--to",
        str(other),
        "--artifact",
        str(repo / "kernel.bin"),
        "--repo",
        str(repo),
        "--",
        sys.executable,
        "-c",
        "pass",
    )
    assert done.returncode == 0, done.stderr
    assert "requires gate gate:rng" in refused(plan, GateInputs(qualification=carried, gates=[other]))
    bad = make_plan(name="bad.toml")
    bad.write_text(bad.read_text() + '\n[gates]\nrequired = ["rgn"]\n')
    checked = fairwin("plan", "check", str(bad))
    assert checked.returncode == 2 and "'rgn' is not a gate" in checked.stderr


def test_a_carry_made_under_a_looser_qualification_than_the_plans_is_refused(
    make_plan: PlanFactory, repo: Path, tmp_path: Path
) -> None:
    q = git(repo, "rev-parse", "HEAD")
    loose = make_plan(name="loose.toml")
    lines = [
        "[qualification]",
        f'repo = "{repo}"',
        'measurement_layer = ["bench/*", "src/*"]',
        'carried_units = ["bench/measure.py::Runner.launch"]',
    ]
    loose.write_text(loose.read_text() + "\n" + "\n".join(lines) + "\n")
    carried = tmp_path / "carried.json"
    assert carry(loose, admission(tmp_path, repo, q), q, carried).returncode == 0
    strict = plan_with_qualification(make_plan, repo)
    message = refused(strict, GateInputs(qualification=carried))
    assert message == (
        f"the carry receipt {carried} was made under a looser [qualification] than the plan's: it did not hold "
        "carried file bench/cells.py; it did not hold carried prefix bench/frozen/; it let src/* change, which the "
        "plan's measurement layer does not; run `fairwin qualify carry` again with this plan (refused by the "
        "qualification check)"
    )


def test_a_window_runs_only_at_its_expected_commit_and_clean(make_plan: PlanFactory, repo: Path) -> None:
    q = git(repo, "rev-parse", "HEAD")
    plan = plan_with_qualification(make_plan, repo)
    later = commit(repo, {"bench/notes.txt": "x\n"}, "later")
    message = refused(plan, GateInputs(expected_commit=q))
    assert message == (
        f"{repo} is at {later[:12]}, not the expected commit {q} ({q[:12]}); check it out there, or "
        "run with the commit this window is for (refused by the expected commit check)"
    )
    assert (
        refused(plan, GateInputs(expected_commit="no-such-ref"))
        == f"expected commit no-such-ref is not a commit of {repo} (refused by the expected commit check)"
    )
    (repo / "src" / "runtime.py").write_text(RUNTIME + "# edited\n")  # at the expected commit, but dirty
    assert "has uncommitted changes (src/runtime.py); commit or stash them" in refused(
        plan, GateInputs(expected_commit=later)
    )
    # The plan's own window.expected_commit, and the command line's flag, refuse the same way.
    plan.write_text(plan.read_text().replace("[window]\n", f'[window]\nexpected_commit = "{q}"\n', 1))
    assert f"not the expected commit {q}" in refused(plan, GateInputs())
    done = fairwin("run", str(plan), "--expected-experiment-commit", later, "--quiet")
    assert done.returncode == 4 and "has uncommitted changes (src/runtime.py)" in done.stderr, done.stderr
    git(repo, "checkout", "--", "src/runtime.py")
    from fairwin.gates.qualify import require_commit

    assert require_commit(repo, later) == later  # clean and there: admitted, and recorded as the head


def test_a_chain_continues_at_a_documented_successor_only(repo: Path) -> None:
    from fairwin.gates.qualify import successor_problems
    from fairwin.plan.checks import Qualification

    rules = Qualification.model_validate(QUALIFICATION)
    first = git(repo, "rev-parse", "HEAD")
    assert successor_problems(repo, rules, first, first) == []
    measured = commit(repo, {"bench/measure.py": MEASURE + "\n\ndef extra():\n    return 1\n"}, "measurement only")
    assert successor_problems(repo, rules, first, measured) == []  # only the measurement layer changed
    served = commit(repo, {"src/runtime.py": RUNTIME + "# tuned\n"}, "the server changed")
    (problem,) = successor_problems(repo, rules, measured, served)
    assert problem == f"files outside the measurement layer changed since {measured[:12]}: src/runtime.py"
    assert successor_problems(repo, rules, served, first) == [
        f"commit {first[:12]} does not descend from {served[:12]}"
    ]


def test_a_gate_artifact_is_bound_to_what_a_remote_server_loads_by_its_pin_on_that_host(
    make_plan: PlanFactory, repo: Path, tmp_path: Path
) -> None:
    """Role B runs on h1: the receipt's kernel.bin binds nothing until B pins that sha256 on h1 (checked at every
    start); refused before any host is contacted, then bound and recorded."""
    q = git(repo, "rev-parse", "HEAD")
    plan = plan_with_qualification(make_plan, repo)
    carried, gate = tmp_path / "carried.json", tmp_path / "gate.json"
    assert carry(plan, admission(tmp_path, repo, q), q, carried).returncode == 0
    assert gate_run(repo, gate, sys.executable, "-c", "pass").returncode == 0
    remote = plan.read_text().replace('[roles."B"]\n', '[roles."B"]\nhost = "h1"\n', 1)
    remote = remote.replace('port = "auto"', "port = 18777") + '\n[hosts.h1]\naddress = "127.0.0.1"\nagent = false\n'
    plan.write_text(remote)
    message = refused(plan, GateInputs(qualification=carried, gates=[gate]))
    assert "gate rng: artifact kernel.bin (sha256 " in message, message
    assert "is what no role of the window pins on its host" in message and "roles.R.identity" in message
    digest = sha256_file(repo / "kernel.bin")
    plan.write_text(
        plan.read_text().replace(
            '[roles."B"]\n', f'[roles."B"]\nidentity = {{ "/opt/k2/kernel.bin" = "{digest}" }}\n', 1
        )
    )
    loaded = load_plan(plan)
    summary = run_gates(
        loaded,
        "controlled",
        loaded.plan.all_modes()["controlled"],
        GateInputs(qualification=carried, gates=[gate]),
        tmp_path / "out",
    )
    assert summary.artifacts_on_hosts == {"rng: kernel.bin": ["role B on host h1: /opt/k2/kernel.bin"]}


def test_a_foreign_admission_receipt_is_read_by_the_fields_the_plan_names_and_says_so(
    make_plan: PlanFactory, repo: Path, tmp_path: Path
) -> None:
    q = git(repo, "rev-parse", "HEAD")
    theirs = tmp_path / "admission-q.json"
    built = {"kernel.bin": sha256_file(repo / "kernel.bin")}
    document = {"format": "dsv41.admission/2", "status": "PASS", "git": {"sha": q}, "built": built}
    theirs.write_text(json.dumps({**document, "sha256": "0" * 64}))  # their own seal, of their own scheme
    plan = plan_with_qualification(make_plan, repo)
    refused = carry(plan, theirs, q, tmp_path / "refused.json")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "declare [qualification.foreign_admission]" in refused.stderr
    foreign = '[qualification.foreign_admission]\nformat = "dsv41.admission/2"\nverdict = "status"\n'
    plan.write_text(plan.read_text() + foreign + 'qualified = ["PASS"]\ncommit = "git.sha"\nartifacts = "built"\n')
    out = tmp_path / "carried.json"
    done = carry(plan, theirs, q, out)
    assert done.returncode == 0, done.stderr
    carried = json.loads(out.read_text())
    assert carried["verdict"] == "CARRIED" and carried["artifacts"] == built
    said = (
        "foreign (dsv41.admission/2): its own seal not checked; read verdict <- status, commit <- git.sha, "
        "artifacts <- built"
    )
    assert carried["admission"]["foreign"] == said
    loaded = load_plan(plan)
    mode = loaded.plan.all_modes()["controlled"]
    summary = run_gates(loaded, "controlled", mode, GateInputs(qualification=out), tmp_path / "out")
    assert summary.qualification is not None and summary.qualification.admission == said
    theirs.write_text(json.dumps({**document, "status": "FAIL"}))
    assert "verdict is 'FAIL', not QUALIFIED" in carry(plan, theirs, q, tmp_path / "failed.json").stderr
    theirs.write_text(json.dumps({key: value for key, value in document.items() if key != "git"}))
    missing = carry(plan, theirs, q, tmp_path / "missing.json")
    assert missing.returncode == 2 and "has no field 'git.sha' the plan names" in missing.stderr


def test_an_override_of_what_a_qualification_vouches_for_is_refused_naming_the_key(
    make_plan: PlanFactory, repo: Path, tmp_path: Path
) -> None:
    """The runbook's carry includes its cells file and its candidate's env file: with a qualification given, a
    `--set` of a cell, or of a role's environment or command, is refused in one line before any host is touched;
    a pinned commit given per launch (the runbook's --worker-commit) is not what was qualified, and runs."""
    q = git(repo, "rev-parse", "HEAD")
    plan = plan_with_qualification(make_plan, repo)
    carried = tmp_path / "carried.json"
    assert carry(plan, admission(tmp_path, repo, q), q, carried).returncode == 0
    for key in ("cells.short-b1.max_tokens=64", 'roles.B.env={"PP4_DEPTH" = "5"}', 'roles.B.argv=["true"]'):
        done = fairwin("run", str(plan), "--qualification", str(carried), "--set", key, "--quiet")
        assert done.returncode == 4 and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"fairwin: error: --set {key.split('=')[0]}: the qualification {carried} vouches")
        assert not (plan.parent / "windows").exists() or not any((plan.parent / "windows").iterdir())
    without = load_plan(plan, ["cells.short-b1.max_tokens=64"])  # no qualification given: an override is recorded
    run_gates(without, "controlled", without.plan.all_modes()["controlled"], GateInputs(), tmp_path)
    allowed = load_plan(plan, ["window.idle_check_s=0.1"])  # outside what was qualified
    mode = allowed.plan.all_modes()["controlled"]
    assert run_gates(allowed, "controlled", mode, GateInputs(qualification=carried), tmp_path).head == q
