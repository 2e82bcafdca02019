"""A production role on a remote host: launched there detached, taken down, given back and recovered over SSH."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fairwin.files import read_jsonl
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import fairwin, only_window, processes_with, status
from tests.integration.production import WATCH, killed_inside, production_state, start_run
from tests.integration.sshd import SshHosts
from tests.integration.test_hosts import with_hosts
from tests.ports import free_port


def remote_production_plan(make_plan: PlanFactory, ssh: SshHosts, model: str, tmp_path: Path) -> Path:
    """Production (role P) on h1, the experiment here; production's cap file is read on h1."""
    cap_file = tmp_path / "h1-etc-environment"  # the loopback "host" shares this file system
    cap_file.write_text("PATH=/usr/bin\nGPU_CLOCK_CAP=1410\n")
    roles = {
        "A": sim_role("--ms-per-round", "2", model=f"exp-{model}"),
        "B": sim_role("--ms-per-round", "2", model=f"exp-{model}"),
        "P": sim_role(model=model, port=free_port(), host="h1", env={"PRODUCTION_OF": "team"}),
    }
    production = {"role": "P", "remote_dir": str(tmp_path / "on-h1"), "must_not_run": [f"--model {model} "], **WATCH}
    plan = make_plan(roles=roles, window={"repeats": 2, "warmup_waves_max": 1}, production=production)
    plan.write_text(
        plan.read_text() + f'\n[telemetry]\ngpu = "none"\nproduction_cap_file = "{cap_file}"\n'
        '\n[runtime]\naccept_unobserved = ["clocks", "gpus"]\n'  # no GPUs here: production's cap file is what is tested
    )
    return with_hosts(plan, ssh)


# Over 30 s on a busy machine: production launched over SSH, a window that takes it down and restores it over
# SSH, and a health watch; each SSH connection costs a key exchange.
@pytest.mark.slow
def test_a_production_role_on_a_remote_host_is_launched_there_taken_down_and_given_back(
    make_plan: PlanFactory, ssh_hosts: SshHosts, stop_production: list[Path], tmp_path: Path
) -> None:
    plan = remote_production_plan(make_plan, ssh_hosts, "prod-h1", tmp_path)
    stop_production.append(plan)
    up = fairwin("production", "up", str(plan))
    assert up.returncode == 0 and up.stdout.startswith("UP: launched pid "), up.stdout + up.stderr
    assert "on host h1" in up.stdout
    pid = int((tmp_path / "on-h1" / "production.pid").read_text())  # written on h1
    state = json.loads((production_state(plan) / "production.json").read_text())
    assert state["pid"] == pid and state["host"] == "h1"
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert b"PRODUCTION_OF=team" in environ  # its declared environment, given over SSH
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 0, done.stderr
    window = only_window(plan)
    rows = read_jsonl(window / "journal.jsonl")
    down = next(e for e in rows if e["step"] == "production down" and e["event"] == "end")
    assert down["how"] == f"stopped pid {pid} on host h1 (SIGTERM)"
    final = status(window)
    assert final["state"] == "complete" and final["restore"]["state"] == "RESTORED"
    assert "on host h1" in final["restore"]["up"]["how"]
    telemetry = json.loads((window / "window.json").read_text())["telemetry"]
    assert telemetry["production_cap_mhz"] == 1410.0
    assert telemetry["production_cap_from"] == f"{tmp_path / 'h1-etc-environment'} on host h1: GPU_CLOCK_CAP"
    assert fairwin("production", "status", str(plan)).returncode == 0
    assert len(processes_with("--model prod-h1 ")) == 1 and processes_with("exp-prod-h1") == []
    assert "fairwin sim: serving prod-h1" in (tmp_path / "on-h1" / "production.log").read_text()


@pytest.mark.slow
def test_recover_gives_a_remote_production_back_over_ssh(
    make_plan: PlanFactory, ssh_hosts: SshHosts, stop_production: list[Path], tmp_path: Path
) -> None:
    plan = remote_production_plan(make_plan, ssh_hosts, "prod-h1-kill", tmp_path)
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    window = killed_inside(plan, start_run(plan, kill_at="start s2:launched"), "start s2:launched")
    assert processes_with("--model prod-h1-kill ") == []  # down on h1 while the window ran
    recovered = fairwin("recover", str(plan))
    assert recovered.returncode == 0, recovered.stderr
    assert "production RESTORED" in recovered.stdout
    assert status(window)["state"] == "interrupted" and processes_with("exp-prod-h1-kill") == []
    assert len(processes_with("--model prod-h1-kill ")) == 1
    assert fairwin("production", "status", str(plan)).returncode == 0


@pytest.mark.slow
def test_two_coordinators_never_hold_a_remote_productions_hardware_at_once(
    make_plan: PlanFactory,
    ssh_hosts: SshHosts,
    stop_production: list[Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No PostgreSQL archive: each coordinator has its own lock file and its own JSONL archive. Production's host
    # holds the lock they share: the file [production] hardware_lock names there.
    from tests.integration.production import wait_for_step

    plan = remote_production_plan(make_plan, ssh_hosts, "prod-h1-two", tmp_path)
    stop_production.append(plan)
    other = plan.with_name("other.toml")
    other.write_text(plan.read_text().replace('output_dir = "windows"', 'output_dir = "elsewhere"', 1))
    assert fairwin("production", "up", str(plan)).returncode == 0
    running = start_run(plan, "--mode", "controlled", "--coordinator", "alice")
    window = wait_for_step(plan, "start s1", running)
    lock = tmp_path / "hardware.lock"  # on h1: the loopback host shares this file system
    assert json.loads(lock.read_text())["window_id"] == window.name
    monkeypatch.setenv("FAIRWIN_LOCK_DIR", str(tmp_path / "bobs-machine"))  # bob coordinates from another machine
    refused = fairwin("run", str(other), "--mode", "controlled", "--quiet", "--coordinator", "bob")
    assert refused.returncode == 4 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"the hardware is held by window {window.name}" in refused.stderr and "coordinator alice" in refused.stderr
    assert f"in the lock file ({lock} on host h1)" in refused.stderr
    assert not list((plan.parent / "elsewhere").glob("*-controlled-*"))  # no window made for bob
    assert running.wait(120) == 0, running.communicate()
    assert status(window)["state"] == "complete" and not lock.exists()  # given back at the close
