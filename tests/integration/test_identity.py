"""The server measured is the server launched: a port's holder is never measured in its place, and a role
process that exits during its start fails that start (real `fairwin sim` processes, here and over SSH)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import SimProcess, fairwin, only_window, processes_with, status
from tests.integration.sshd import SshHosts
from tests.integration.test_hosts import with_hosts
from tests.ports import free_port


def _kill(marker: str) -> None:
    """SIGKILL the test's own squatters, and wait until they are gone (a killed process keeps its command line
    for a moment, and the next assertion would count it)."""
    import os
    import signal
    import time

    for pid in processes_with(marker):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)


def _left(marker: str) -> list[str]:
    """What still runs with ``marker`` in its command line, named, for an assertion's message."""
    found = []
    for pid in processes_with(marker):
        try:
            found.append(f"{pid}: {Path(f'/proc/{pid}/cmdline').read_bytes().replace(bytes(1), b' ').decode()}")
        except OSError:
            continue
    return found


def _nothing_from_the_window(plan: Path, window: Path) -> None:
    """A failed window: no decision, no pooled row, nothing archived."""
    assert status(window)["state"] == "failed"
    assert not (window / "decision.json").exists()
    pooled = window / "pooled.jsonl"
    assert not pooled.exists() or pooled.read_text() == ""
    assert not (plan.parent / "windows" / "control-archive.jsonl").exists()


def _run_beside_squatters(plan: Path, marker: str) -> tuple[subprocess.CompletedProcess[str], list[int]]:
    """The window, and the squatters its roles' wrappers left (``marker`` in their command line), killed after."""
    try:
        return fairwin("run", str(plan), "--mode", "controlled", "--quiet"), processes_with(marker)
    finally:
        _kill(marker)


def _squatted(port: int, model: str, **overrides: object) -> dict[str, object]:
    """A role whose wrapper first leaves a healthy sim of its own session on the port (``model``-old, a server
    left over from yesterday), then execs the role's own sim there, which dies on bind."""
    sim = shlex.join([sys.executable, "-m", "fairwin", "sim", "--port", str(port)])
    role = sim_role(model=model, port=port, **overrides)
    role["argv"] = [
        "sh",
        "-c",
        f"setsid {sim} --model {model}-old >/dev/null 2>&1 & sleep 2; exec {sim} --model {model}",
    ]
    return role


def test_a_server_that_dies_on_bind_while_a_squatter_answers_fails_its_start(make_plan: PlanFactory) -> None:
    # The role's wrapper leaves a healthy sim of its own session on the port (a server left over from
    # yesterday), then execs the role's sim, which dies on bind: the squatter answers the health check.
    port = free_port()
    role = _squatted(port, "squatter-new")
    plan = make_plan(roles={"A": role, "B": role})
    done, squatters = _run_beside_squatters(plan, "squatter-new-old")
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"role A: port {port} here is held by pid {squatters[0]}" in done.stderr, done.stderr
    assert "not by the server fairwin launched" in done.stderr
    window = only_window(plan)
    _nothing_from_the_window(plan, window)
    receipt = json.loads((window / "starts" / "s1" / "start.json").read_text())
    assert receipt["pooled_rows"] == 0 and receipt["stop"]["signal"] == "SIGTERM"  # the wrapper, still waiting
    assert _left("squatter-new") == []


def test_a_sim_whose_port_is_held_says_so_in_one_line() -> None:
    squatter = SimProcess("--model", "bind-held")
    squatter.wait_healthy()
    try:
        done = fairwin("sim", "--port", str(squatter.port), "--model", "bind-second", timeout=30)
    finally:
        squatter.stop()
    assert done.returncode == 2 and done.stdout == ""  # it never said it serves
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"fairwin: error: cannot listen on 127.0.0.1:{squatter.port}: Address already in use" in done.stderr


@pytest.mark.slow  # in make test; test-fast keeps the quicker cases of the same feature
def test_a_role_process_that_exits_while_its_server_answers_fails_the_start(make_plan: PlanFactory) -> None:
    # A wrapper that backgrounds its server and exits: the server still answers (it is in the role's process
    # group), but the process fairwin launched is gone, so nothing from the start is trusted or pooled.
    sim = shlex.join([sys.executable, "-m", "fairwin", "sim", "--port", "{port}", "--ms-per-round", "25"])
    role = sim_role(model="wrapper-exits")
    role["argv"] = ["sh", "-c", f"{sim} --model wrapper-exits & sleep 4; exit 0"]
    plan = make_plan(
        roles={"A": role, "B": role},
        cells={"c": {"families": ["prose", "code"], "prompt_tokens": 32, "max_tokens": 64, "streams_per_wave": 2}},
    )
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 3, done.stderr
    assert "role A exited with code 0" in done.stderr or "exited with code 0 before it was healthy" in done.stderr
    _nothing_from_the_window(plan, only_window(plan))
    assert processes_with("wrapper-exits") == []  # its server, left behind by the wrapper, was stopped too


@pytest.mark.slow
def test_a_squatter_on_a_remote_role_port_is_found_over_ssh(make_plan: PlanFactory, ssh_hosts: SshHosts) -> None:
    port = free_port()
    role = _squatted(port, "ssh-squatter", host="h1")
    plan = with_hosts(make_plan(roles={"A": role, "B": role}), ssh_hosts)
    done, squatters = _run_beside_squatters(plan, "ssh-squatter-old")
    assert done.returncode == 3, done.stderr
    assert f"role A on host h1: port {port} on host h1 is held by pid {squatters[0]}" in done.stderr, done.stderr
    _nothing_from_the_window(plan, only_window(plan))
    assert _left("ssh-squatter") == []


def _wrapped(model: str, port: int | str = "{port}") -> dict[str, object]:
    """A role whose config is added by its wrapper script from SPEC_OVERRIDE, never in its argv."""
    sim = shlex.join([sys.executable, "-m", "fairwin", "sim", "--port", str(port), "--model", model])
    role = sim_role(model=model, env={"SPEC_OVERRIDE": "2"})
    role["argv"] = ["sh", "-c", f'exec {sim} ${{SPEC_OVERRIDE:+--spec-tokens "$SPEC_OVERRIDE"}}']
    return role


@pytest.mark.slow  # in make test; test-fast keeps the quicker cases of the same feature
def test_speculation_set_only_in_a_wrapper_script_is_read_from_the_server_and_compared(
    make_plan: PlanFactory,
) -> None:
    # B declares the config its wrapper really runs: read from the sim's own report, the window runs.
    declared = {**_wrapped("wrapped-b"), "speculative": {"method": "sim", "num_speculative_tokens": 2}}
    plan = make_plan(roles={"A": sim_role(model="wrapped-a"), "B": declared})
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 0, done.stderr
    s2 = json.loads((only_window(plan) / "starts" / "s2" / "start.json").read_text())
    assert s2["speculative"] == {"method": "sim", "num_speculative_tokens": 2}
    assert s2["speculative_source"] == "server log"
    # Declared as 3, the hidden 2 is refused at B's start, naming the field (argv alone would have seen none).
    wrong = {**_wrapped("wrapped-c"), "speculative": {"method": "sim", "num_speculative_tokens": 3}}
    plan = make_plan(roles={"A": sim_role(model="wrapped-a"), "B": wrong}, name="wrong.toml")
    refused = fairwin("run", str(plan), "--mode", "controlled", "--quiet", "--out", str(plan.parent / "w2"))
    assert refused.returncode == 3, refused.stderr
    assert "role B: speculative config field 'num_speculative_tokens' is 2 as the server reports it" in refused.stderr
    assert processes_with("wrapped-c") == []


@pytest.mark.slow  # in make test; test-fast keeps the quicker cases of the same feature
def test_a_config_that_cannot_be_observed_is_refused_unless_the_plan_accepts_it(make_plan: PlanFactory) -> None:
    # A server that reports nothing at start-up (its log is silent), started by a wrapper: nothing to compare.
    silent = sim_role(model="silent")
    silent["argv"] = ["sh", "-c", f"exec {shlex.join(silent['argv'])} >/dev/null 2>&1".replace("'{port}'", "{port}")]
    plan = make_plan(roles={"A": silent, "B": silent})
    refused = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert refused.returncode == 3, refused.stderr
    assert "role A: its speculative config cannot be observed" in refused.stderr
    assert 'add "speculative" to runtime.accept_unobserved' in refused.stderr
    text = plan.read_text() + '\n[runtime]\naccept_unobserved = ["speculative"]\n'
    accepted = plan.with_name("accepted.toml")
    accepted.write_text(text)
    done = fairwin("run", str(accepted), "--mode", "controlled", "--quiet", "--out", str(plan.parent / "w2"))
    assert done.returncode == 0, done.stderr
    window = next(p for p in (plan.parent / "w2").iterdir() if p.is_dir())
    decision = json.loads((window / "decision.json").read_text())
    assert decision["unobserved"][0] == (
        "speculative config (no server report, no argv) in s1, s2, s3: its checks compared nothing; "
        "accepted by runtime.accept_unobserved"
    )
    assert decision["reasons"][-1].startswith("unobserved: speculative config")
