"""The server measured is the server launched: a port's holder is never measured in its place, and a role
process that exits during its start fails that start (real `fairwin sim` processes, here and over SSH)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from fairwin.launch.spec import free_port
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import SimProcess, fairwin, only_window, processes_with, status
from tests.integration.sshd import SshHosts
from tests.integration.test_hosts import with_hosts


def _kill(marker: str) -> None:
    import os
    import signal

    for pid in processes_with(marker):
        os.kill(pid, signal.SIGKILL)


def _nothing_from_the_window(plan: Path, window: Path) -> None:
    """A failed window: no decision, no pooled row, nothing archived."""
    assert status(window)["state"] == "failed"
    assert not (window / "decision.json").exists()
    pooled = window / "pooled.jsonl"
    assert not pooled.exists() or pooled.read_text() == ""
    assert not (plan.parent / "windows" / "control-archive.jsonl").exists()


def test_a_server_that_dies_on_bind_while_a_squatter_answers_fails_its_start(make_plan: PlanFactory) -> None:
    # The role's wrapper leaves a healthy sim of its own session on the port (a server left over from
    # yesterday), then execs the role's sim, which dies on bind: the squatter answers the health check.
    port = free_port()
    sim = shlex.join([sys.executable, "-m", "fairwin", "sim", "--port", str(port)])
    wrapper = f"setsid {sim} --model squatter-old >/dev/null 2>&1 & sleep 2; exec {sim} --model squatter-new"
    role = sim_role(model="squatter-new", port=port)
    role["argv"] = ["sh", "-c", wrapper]
    plan = make_plan(roles={"A": role, "B": role})
    try:
        done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
        squatters = processes_with("squatter-old")
    finally:
        _kill("squatter-old")
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"role A: port {port} here is held by pid {squatters[0]}" in done.stderr, done.stderr
    assert "not by the server fairwin launched" in done.stderr
    window = only_window(plan)
    _nothing_from_the_window(plan, window)
    receipt = json.loads((window / "starts" / "s1" / "start.json").read_text())
    assert receipt["pooled_rows"] == 0 and receipt["stop"]["signal"] == "SIGTERM"  # the wrapper, still waiting
    assert processes_with("squatter-new") == []


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
    sim = shlex.join([sys.executable, "-m", "fairwin", "sim", "--port", str(port)])
    wrapper = f"setsid {sim} --model ssh-squatter-old >/dev/null 2>&1 & sleep 2; exec {sim} --model ssh-squatter"
    role = sim_role(model="ssh-squatter", port=port, host="h1")
    role["argv"] = ["sh", "-c", wrapper]
    plan = with_hosts(make_plan(roles={"A": role, "B": role}), ssh_hosts)
    try:
        done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
        squatters = processes_with("ssh-squatter-old")
    finally:
        _kill("ssh-squatter-old")
    assert done.returncode == 3, done.stderr
    assert f"role A on host h1: port {port} on host h1 is held by pid {squatters[0]}" in done.stderr, done.stderr
    _nothing_from_the_window(plan, only_window(plan))
    assert processes_with("ssh-squatter") == []
