"""A role across hosts: its workers launched first, each waited ready, then its head; real sshd on loopback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fairwin.files import read_jsonl
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import fairwin, only_window, processes_with, servers_with, status
from tests.integration.production import killed_inside, start_run
from tests.integration.sshd import SshHosts
from tests.integration.test_hosts import with_hosts
from tests.ports import free_port

# An engine worker stand-in: it listens on its port at once, says it is ready after a while, then serves on.
# It serves on when the channel its output went to is gone (its fairwin killed before the ready line, CI
# 2026-12-02: the line's BrokenPipeError had ended it before recover could), as a worker logging to a file does.
WORKER = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n"
    "time.sleep(float(sys.argv[2]))\n"
    "try:\n    print('engine ready', flush=True)\nexcept BrokenPipeError:\n    sys.stdout = None\n"
    "time.sleep(3600)\n"
)


def worker(marker: str, port: int, delay_s: float = 0.3, **ready: Any) -> dict[str, Any]:
    return {
        "host": "h1",
        "argv": ["{python}", "-c", WORKER, str(port), str(delay_s), marker],
        "env": {"WORKER_OF": "{head_address}:{port}"},
        "ready": {"log": "engine ready", "port": port, "after_s": 0.2, "timeout_s": 10, **ready},
    }


def spanning_plan(make_plan: PlanFactory, ssh: SshHosts, model: str, the_worker: dict[str, Any]) -> Path:
    """Role A here; role B's head on h2 after its worker on h1."""
    roles = {
        "A": sim_role("--ms-per-round", "4", model=f"{model}-a"),
        "B": sim_role(
            "--ms-per-round",
            "4",
            model=f"{model}-b",
            port=free_port(),
            host="h2",
            env={"PYTHONUNBUFFERED": "1"},
            workers=[the_worker],
        ),
    }
    plan = make_plan(roles=roles, window={"repeats": 2, "warmup_waves_max": 1})
    return with_hosts(plan, ssh)


@pytest.mark.slow
def test_a_role_across_hosts_starts_its_worker_ready_first_and_stops_it_last(
    make_plan: PlanFactory, ssh_hosts: SshHosts
) -> None:
    port = free_port()
    # The worker prints its line 1 s after it starts. Readiness is timed from the end of the launch, which over
    # SSH takes a few tenths of a second after the worker started (make test, 2026-12-04: a 0.3 s line was ready at
    # 0.206 s); before its line it could be ready at its `after_s`, 0.2 s.
    plan = spanning_plan(make_plan, ssh_hosts, "span-ok", worker("span-ok-worker", port, delay_s=1.0))
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 0, done.stderr
    window = only_window(plan)
    assert status(window)["state"] == "complete"
    rows = [e for e in read_jsonl(window / "journal.jsonl") if e["step"] == "start s2"]
    assert [(e["event"], e.get("member"), e.get("host")) for e in rows] == [
        ("begin", None, None),
        ("launching", "worker 1", "h1"),
        ("launched", "worker 1", "h1"),
        ("launching", None, "h2"),
        ("launched", None, "h2"),
        ("end", None, None),
    ]
    s2 = json.loads((window / "starts" / "s2" / "start.json").read_text())
    (entry,) = s2["workers"]
    assert entry["member"] == "worker 1" and entry["host"] == "h1" and isinstance(entry["pid"], int)
    assert entry["ready_after_s"] >= 0.5  # not before its 'engine ready' line
    assert entry["stop"]["signal"] == "SIGTERM" and s2["stop"]["signal"] == "SIGTERM"
    assert s2["env_check"] == ["matches the declaration"]  # the worker's too, read on h1 over SSH
    assert (window / "starts" / "s2" / "h1.log").read_text() == "engine ready\n"
    assert "\nfairwin sim: serving span-ok-b on http://" in (window / "starts" / "s2" / "h2.log").read_text()
    assert processes_with("span-ok-worker") == [] and processes_with("span-ok-b") == []


@pytest.mark.slow
def test_a_worker_that_exits_before_it_is_ready_fails_the_start_before_the_head_launches(
    make_plan: PlanFactory, ssh_hosts: SshHosts
) -> None:
    broken = worker("span-dead-worker", free_port())
    broken["argv"] = ["{python}", "-c", "import sys; print('no GPU'); sys.exit(7)", "span-dead-worker"]
    plan = spanning_plan(make_plan, ssh_hosts, "span-dead", broken)
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 3, done.stderr
    assert "role B worker 1 on host h1: exited with code 7 before it was ready" in done.stderr
    assert done.stderr.count("\n") == 1
    window = only_window(plan)
    launched = [e for e in read_jsonl(window / "journal.jsonl") if e["event"] == "launched"]
    assert [(e["step"], e.get("member")) for e in launched] == [("start s1", None), ("start s2", "worker 1")]
    assert "no GPU" in (window / "starts" / "s2" / "h1.log").read_text()
    assert processes_with("span-dead") == []


@pytest.mark.slow
def test_a_worker_never_ready_times_out_naming_the_check_that_did_not_pass(
    make_plan: PlanFactory, ssh_hosts: SshHosts
) -> None:
    plan = spanning_plan(make_plan, ssh_hosts, "span-slow", worker("span-slow-worker", free_port(), 60, timeout_s=1))
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 3, done.stderr
    assert "role B worker 1 on host h1: not ready after 1 s (no line matching 'engine ready'" in done.stderr
    assert processes_with("span-slow") == []


@pytest.mark.slow
def test_recover_stops_the_workers_a_dead_fairwin_left_on_their_hosts(
    make_plan: PlanFactory, ssh_hosts: SshHosts
) -> None:
    plan = spanning_plan(make_plan, ssh_hosts, "span-kill", worker("span-kill-worker", free_port()))
    window = killed_inside(plan, start_run(plan, kill_at="start s2:launched"), "start s2:launched")
    assert len(servers_with("span-kill-worker")) == 1  # the worker, launched on h1 before fairwin died
    recovered = fairwin("recover", str(plan))
    assert recovered.returncode == 0, recovered.stderr
    assert recovered.stdout.startswith(f"recovered window {window.name}: stopped 1 server process(es)")
    final = status(window)
    assert final["state"] == "interrupted" and final["recovery"]["stopped"][0].endswith("on host h1 (SIGTERM)")
    assert processes_with("span-kill") == []
