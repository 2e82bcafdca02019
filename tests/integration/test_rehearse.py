"""The API rehearsal against `fairwin sim`: PASS, a wrong parameter, no answer, a control that succeeds."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import PlanFactory
from tests.integration.helpers import SimProcess, fairwin, only_window
from tests.integration.production import production_plan

SECRET = "sk-do-not-write-me-anywhere"


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[SimProcess]:
    sim = SimProcess("--model", "prod", *getattr(request, "param", ("--spec-tokens", "2", "--acceptance", "0.5")))
    try:
        sim.wait_healthy()
        yield sim
    finally:
        sim.stop()


def rehearse(plan: Path, sim: SimProcess, out: Path, *extra: str):  # type: ignore[no-untyped-def]
    return fairwin("rehearse", str(plan), "--url", sim.url, "--model", "prod", "--out", str(out), *extra)


def document(out: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((out / "rehearsal.json").read_text())


def test_pass_against_a_speculative_server(make_plan: PlanFactory, server: SimProcess, tmp_path: Path) -> None:
    os.environ["FAIRWIN_TEST_KEY"] = SECRET
    out = tmp_path / "rehearsal"
    done = rehearse(make_plan(), server, out, "--api-key-env", "FAIRWIN_TEST_KEY")
    assert done.returncode == 0, done.stdout + done.stderr
    doc = document(out)
    assert doc["verdict"] == "PASS" and doc["cause_confirmed"] is True
    names = [p["name"] for p in doc["probes"]]
    assert names == ["health", "metrics", "tokenize-completions", "warmup", "cell short-b1", "control logit_bias"]
    control = doc["probes"][-1]
    assert control["status"] == 400 and "logit_bias" in control["error_body"] and control["ok"]
    assert control["http_status"] == 200  # like vLLM, a streaming refusal arrives as an error event
    stream = doc["probes"][4]
    assert stream["usage"]["completion_tokens"] == 8 and stream["finish_reason"] == "length"
    assert all(len(p["request_sha256"]) == 64 for p in doc["probes"])
    assert stat.S_IMODE((out / "responses.jsonl").stat().st_mode) == 0o600
    assert doc["headers_sent"] == ["Authorization"]
    for path in out.iterdir():
        assert SECRET not in path.read_text()


def test_the_terminator_probe_forces_the_eos_at_priority_10(
    make_plan: PlanFactory, server: SimProcess, tmp_path: Path
) -> None:
    # The runbook's rehearsal: --eos adds the terminator probe, forced with allowed_token_ids (not logit_bias,
    # which a speculative server refuses), and every probe goes at priority 10 unless the plan says otherwise.
    out = tmp_path / "rehearsal"
    done = rehearse(make_plan(), server, out, "--eos", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    probes = {p["name"]: p for p in document(out)["probes"]}
    eos = probes["eos"]
    assert (eos["ok"], eos["finish_reason"], eos["stop_reason"], eos["usage"]["completion_tokens"]) == (
        True,
        "stop",
        None,
        1,
    )
    assert probes["cell short-b1"]["finish_reason"] == "length" and "stop_reason" in probes["cell short-b1"]
    sent = {
        line["name"]: line["request"] for line in map(json.loads, (out / "responses.jsonl").read_text().splitlines())
    }
    assert sent["eos"]["allowed_token_ids"] == [2] and sent["eos"]["ignore_eos"] is False
    assert "logit_bias" not in sent["eos"]
    assert {name: body.get("priority") for name, body in sent.items() if body and "max_tokens" in body} == {
        "warmup": 10,
        "cell short-b1": 10,
        "eos": 10,
        "control logit_bias": 10,
    }
    # A wrong end-of-sequence id is read as the probe being wrong for this model, and the rehearsal FAILs.
    wrong = tmp_path / "wrong"
    assert rehearse(make_plan(name="wrong.toml"), server, wrong, "--eos", "7").returncode == 5
    (failure,) = document(wrong)["failures"]
    assert failure.startswith("eos: 4xx-like: the terminator probe ended with finish_reason 'length', not 'stop'")


def test_a_cell_is_rehearsed_with_its_real_prompt_where_the_plan_asks(
    make_plan: PlanFactory, server: SimProcess, tmp_path: Path
) -> None:
    plan = make_plan()
    plan.write_text(plan.read_text() + "\n[rehearsal]\nreal_prompts = true\n")
    out = tmp_path / "rehearsal"
    done = rehearse(plan, server, out)
    assert done.returncode == 0, done.stdout + done.stderr
    cell = next(p for p in document(out)["probes"] if p["name"] == "cell short-b1")
    assert cell["ok"] and 56 <= cell["usage"]["prompt_tokens"] <= 64 + 8, cell  # the cell's 64, its tolerance
    assert cell["usage"]["completion_tokens"] == 8  # still at most 8 generated tokens
    sent = {
        line["name"]: line["request"] for line in map(json.loads, (out / "responses.jsonl").read_text().splitlines())
    }
    assert "rehearsal sends a short prompt" not in sent["cell short-b1"]["prompt"]
    assert "rehearsal sends a short prompt" in sent["warmup"]["prompt"]


@pytest.mark.parametrize("server", [("--spec-tokens", "2", "--reject-param", "min_p")], indirect=True)
def test_a_wrong_parameter_fails_with_the_4xx_reading(
    make_plan: PlanFactory, server: SimProcess, tmp_path: Path
) -> None:
    plan = make_plan(cells={"short-b1": {"families": ["prose"], "prompt_tokens": 64, "extra_body": {"min_p": 0.1}}})
    out = tmp_path / "r"
    done = rehearse(plan, server, out)
    assert done.returncode == 5
    doc = document(out)
    cell = next(p for p in doc["probes"] if p["name"] == "cell short-b1")
    assert doc["verdict"] == "FAIL" and cell["status"] == 400 and cell["reading"].startswith("4xx")
    assert "min_p is not supported" in cell["error_body"]


@pytest.mark.parametrize("server", [("--spec-tokens", "2", "--fault", "drop-connection")], indirect=True)
def test_dropped_connections_read_as_no_answer(make_plan: PlanFactory, server: SimProcess, tmp_path: Path) -> None:
    out = tmp_path / "r"
    assert rehearse(make_plan(), server, out).returncode == 5
    cell = next(p for p in document(out)["probes"] if p["name"] == "cell short-b1")
    assert cell["reading"].startswith("no answer") and cell["ok"] is False


@pytest.mark.parametrize("server", [()], indirect=True)
def test_a_control_that_succeeds_means_the_cause_is_not_confirmed(
    make_plan: PlanFactory, server: SimProcess, tmp_path: Path
) -> None:
    out = tmp_path / "r"
    done = rehearse(make_plan(), server, out)
    assert done.returncode == 5 and "cause not confirmed" in done.stderr
    doc = document(out)
    assert doc["cause_confirmed"] is False and doc["verdict"] == "FAIL"
    assert doc["probes"][-1]["status"] == 200


@pytest.mark.slow
def test_run_requires_a_fresh_passing_rehearsal_of_this_plan(
    make_plan: PlanFactory, server: SimProcess, tmp_path: Path
) -> None:
    plan = make_plan(window={"repeats": 2})
    plan.write_text(plan.read_text() + f'\n[rehearsal]\nurl = "{server.url}"\nmodel = "prod"\n')
    good = tmp_path / "good"
    assert fairwin("rehearse", str(plan), "--out", str(good)).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    other = make_plan(name="other.toml")
    assert rehearse(other, server, elsewhere).returncode == 0
    refused = fairwin("run", str(plan), "--require-rehearsal", str(elsewhere))
    assert refused.returncode == 4, refused.stderr
    assert f"rehearsal {elsewhere} vouches for what changed since: rehearsal.model, rehearsal.url;" in refused.stderr
    assert not (plan.parent / "windows").exists()
    # A pin passed at run time that the rehearsal does not vouch for (the candidate's file) leaves it valid.
    verifier = tmp_path / "verifier.py"
    verifier.write_text("print('verified')\n")
    pin = f'roles.B.identity."{verifier}"={hashlib.sha256(verifier.read_bytes()).hexdigest()}'
    checkout = tmp_path / "b-checkout"  # the candidate's code, pinned per launch as the runbook's --worker-commit
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    subprocess.run(["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "candidate"], check=True)  # fmt: skip
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    commit = f"roles.B.repo.commit={head.strip()}"
    sets = ["--set", pin, "--set", f'roles.B.repo.path="{checkout}"', "--set", commit]
    done = fairwin("run", str(plan), *sets, "--require-rehearsal", str(good), "--quiet")
    assert done.returncode == 0, done.stderr
    manifest = json.loads((only_window(plan) / "window.json").read_text())
    assert manifest["plan_file_sha256"] == hashlib.sha256(plan.read_bytes()).hexdigest() != manifest["plan_sha256"]
    assert [(o["key"], o["value"]) for o in manifest["plan_overrides"]][1:] == [
        ("roles.B.repo.path", str(checkout)),
        ("roles.B.repo.commit", head.strip()),
    ]
    assert manifest["gates"]["checkouts"]  # the pinned checkout was checked with the gates, at the commit set
    assert manifest["gates"]["rehearsal"]["path"] == str(good)


def test_a_rehearsal_is_refused_when_productions_declaration_changed_naming_the_field(
    make_plan: PlanFactory, server: SimProcess, tmp_path: Path
) -> None:
    plan = production_plan(make_plan, "rehearsed")  # never brought up: the gate refuses before anything
    plan.write_text(plan.read_text() + f'\n[rehearsal]\nurl = "{server.url}"\nmodel = "prod"\n')
    good = tmp_path / "good"
    assert fairwin("rehearse", str(plan), "--out", str(good)).returncode == 0
    refused = fairwin("run", str(plan), "--set", "production.commit=bbbbbbb", "--require-rehearsal", str(good))
    assert refused.returncode == 4, refused.stderr
    assert f"rehearsal {good} vouches for what changed since: production.commit; rehearse again" in refused.stderr
    assert not (plan.parent / "windows").exists()


def test_a_client_only_rehearsal_does_not_probe_metrics(make_plan: PlanFactory) -> None:
    from fairwin.gates.rehearsal import probes_for
    from fairwin.plan import load_plan

    counted = [p.name for p in probes_for(load_plan(make_plan()), "m")]
    plain = [p.name for p in probes_for(load_plan(make_plan(window={"counters": "none"}, name="plain.toml")), "m")]
    assert "metrics" in counted and "metrics" not in plain
    assert [n for n in counted if n != "metrics"] == plain


@pytest.mark.parametrize(
    "server",
    [("--spec-tokens", "2", "--reject-param", "logprobs"), ("--spec-tokens", "2")],
    indirect=True,
    ids=["refused", "served"],
)
def test_the_greedy_diagnostics_request_shape_is_rehearsed(
    make_plan: PlanFactory, server: SimProcess, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    plan = make_plan()
    plan.write_text(plan.read_text() + "\n[diagnostics.greedy]\nmax_tokens = 16\n")
    out = tmp_path / "r"
    done = rehearse(plan, server, out)
    probe = next(p for p in document(out)["probes"] if p["name"] == "greedy diagnostics")
    if request.node.callspec.id == "served":
        assert done.returncode == 0 and probe["reading"] is None and probe["status"] == 200
    else:
        assert done.returncode == 5 and probe["status"] == 400 and probe["reading"].startswith("4xx")
