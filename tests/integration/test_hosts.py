"""Roles on remote hosts over SSH: real sshd servers on loopback (tests/integration/sshd.py), `fairwin sim`."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fairwin.files import read_jsonl, scan_jsonl, sha256_file
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import OWN_SESSION, fairwin, only_window, processes_with, servers_with, status
from tests.integration.production import WATCH, killed_inside, start_run
from tests.integration.sshd import SshHosts
from tests.ports import free_port


def remote_plan(make_plan: PlanFactory, ssh: SshHosts, model: str, orphan_b: bool = False, **extra: object) -> Path:
    """Role A on h1 and B on h2; ``orphan_b``: B's output goes to a file on its host, so a B whose fairwin died
    (and with it the SSH channel B wrote to) keeps running whenever it logs, as a server with a log file does."""
    roles = {
        # Unbuffered: the sim's output reaches its log line by line, as a server's logging does.
        "A": sim_role(
            "--ms-per-round", "4", model=f"{model}-a", port=free_port(), host="h1", env={"PYTHONUNBUFFERED": "1"}
        ),
        "B": sim_role(
            "--ms-per-round", "4", model=f"{model}-b", port=free_port(), host="h2", env={"PYTHONUNBUFFERED": "1"}
        ),
    }
    if orphan_b:
        b_log = ssh.known_hosts.parent / f"{model}-b.log"
        roles["B"]["argv"] = ["sh", "-c", f'exec "$0" "$@" > {b_log} 2>&1', *roles["B"]["argv"]]
    plan = make_plan(roles=roles, window={"repeats": 2, "warmup_waves_max": 1}, **extra)
    return with_hosts(plan, ssh)


def with_hosts(plan: Path, ssh: SshHosts) -> Path:
    """The plan, with a [hosts.NAME] table for each loopback sshd."""
    hosts = "".join(
        f"\n[hosts.{name}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in table.items())
        for name, table in ssh.plan_hosts().items()
    )
    plan.write_text(plan.read_text() + hosts)
    return plan


def pin(plan: Path, role: str, path: Path, digest: str) -> None:
    """Add an identity pin to a role of a written plan."""
    text = plan.read_text()
    header = f'[roles."{role}"]\n'
    plan.write_text(text.replace(header, f'{header}identity = {{ "{path}" = "{digest}" }}\n', 1))


def checkout(tmp_path: Path) -> tuple[Path, str]:
    """A git checkout with one commit: the code a role's host must run."""
    repo = tmp_path / "engine-src"
    repo.mkdir()
    run_git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "engine.py").write_text("SPEED = 1\n")
    subprocess.run([*run_git, "add", "-A"], check=True)
    subprocess.run([*run_git, "commit", "-qm", "engine"], check=True)
    head = subprocess.run([*run_git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    return repo, head


def pin_repo(plan: Path, role: str, repo: Path, commit: str) -> None:
    """Pin a role of a written plan to a checkout on its host."""
    header = f'[roles."{role}"]\n'
    plan.write_text(plan.read_text().replace(header, f'{header}repo = {{ path = "{repo}", commit = "{commit}" }}\n', 1))


def test_a_pinned_checkout_at_another_commit_or_dirty_is_refused_before_any_launch(
    make_plan: PlanFactory, ssh_hosts: SshHosts, tmp_path: Path
) -> None:
    repo, head = checkout(tmp_path)
    plan = remote_plan(make_plan, ssh_hosts, "ssh-pinned")
    pin_repo(plan, "B", repo, "0" * 40)
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 4 and done.stderr.count("\n") == 1, done.stderr
    assert f"pinned code: role B on host h2: {repo} is at {head[:12]}, not the pinned 000000000000" in done.stderr
    assert not (plan.parent / "windows").exists() and processes_with("ssh-pinned") == []
    plan.write_text(plan.read_text().replace("0" * 40, head[:10]))
    (repo / "engine.py").write_text("SPEED = 2\n")  # at the pinned commit, but edited on the host
    dirty = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert dirty.returncode == 4 and f"{repo} is at {head[:12]} but has uncommitted changes (engine.py)" in dirty.stderr
    plan.write_text(plan.read_text().replace(str(repo), str(tmp_path / "nowhere")))
    missing = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert missing.returncode == 4 and "is not a git checkout there (or git is missing)" in missing.stderr


@pytest.mark.slow
def test_a_window_runs_its_roles_on_two_remote_hosts(
    make_plan: PlanFactory, ssh_hosts: SshHosts, tmp_path: Path
) -> None:
    plan = remote_plan(make_plan, ssh_hosts, "ssh-ok")
    worker = tmp_path / "worker.so"
    worker.write_bytes(b"the worker library the plan was qualified with")
    pin(plan, "B", worker, sha256_file(worker))
    repo, head = checkout(tmp_path)
    pin_repo(plan, "B", repo, head)  # the code on h2 is the pinned commit, clean
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 0, done.stderr
    window = only_window(plan)
    assert status(window)["state"] == "complete"
    gates = json.loads((window / "window.json").read_text())["gates"]
    assert gates["checkouts"] == {"role B on host h2": {"path": str(repo), "commit": head}}
    for start, host in (("s1", "h1"), ("s2", "h2"), ("s3", "h1")):
        receipt = json.loads((window / "starts" / start / "start.json").read_text())
        assert receipt["env_check"] == ["matches the declaration"]  # read from /proc on the host, over SSH
        assert receipt["stop"]["signal"] == "SIGTERM"
        log = (window / "starts" / start / f"{host}.log").read_text()  # the server's output, streamed back
        assert f"\nfairwin sim: serving ssh-ok-{'b' if host == 'h2' else 'a'} on http://" in log
    s2 = json.loads((window / "starts" / "s2" / "start.json").read_text())
    assert s2["host"] == "h2" and s2["identity"] == {str(worker): sha256_file(worker)}  # checked on h2, over SSH
    launched = [e for e in read_jsonl(window / "journal.jsonl") if e["event"] == "launched"]
    assert [e["host"] for e in launched] == ["h1", "h2", "h1"] and all(isinstance(e["pid"], int) for e in launched)
    assert processes_with("ssh-ok-a") == [] and processes_with("ssh-ok-b") == []


@pytest.mark.slow
def test_a_worker_whose_pinned_file_changed_is_refused_before_it_starts(
    make_plan: PlanFactory, ssh_hosts: SshHosts, tmp_path: Path
) -> None:
    plan = remote_plan(make_plan, ssh_hosts, "ssh-pin")
    worker = tmp_path / "worker.so"
    worker.write_bytes(b"rebuilt since")
    pin(plan, "A", worker, "0" * 64)
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 3, done.stderr
    assert f"role A on host h1: {worker} has sha256 {sha256_file(worker)[:16]}..., not the pinned 0000" in done.stderr
    assert not (only_window(plan) / "starts" / "s1" / "h1.log").exists() and processes_with("ssh-pin") == []


def test_a_gate_that_refuses_refuses_before_any_host_is_logged_into(
    make_plan: PlanFactory, ssh_hosts: SshHosts
) -> None:
    plan = remote_plan(make_plan, ssh_hosts, "ssh-gated")
    plan.write_text(plan.read_text() + '\n[gates]\nrequired = ["rehearsal"]\n')
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 4, done.stderr
    assert "the plan requires gate rehearsal, and it was not given" in done.stderr
    assert [host.logins() for host in ssh_hosts.hosts] == [0, 0]
    assert not (plan.parent / "windows").exists()
    # The count is real: the same reachability check the window makes after its gates logs into each host once.
    import asyncio

    from fairwin.launch.ssh import unreachable
    from fairwin.plan import load_plan
    from fairwin.plan.site import Site

    assert asyncio.run(unreachable(Site.for_mode(load_plan(plan), "controlled").remote)) == []
    deadline = time.monotonic() + 5
    while [host.logins() for host in ssh_hosts.hosts] != [1, 1] and time.monotonic() < deadline:
        time.sleep(0.05)  # sshd writes its log line as it accepts
    assert [host.logins() for host in ssh_hosts.hosts] == [1, 1]


def test_an_unknown_host_key_is_refused_in_one_line(make_plan: PlanFactory, ssh_hosts: SshHosts) -> None:
    ssh_hosts.known_hosts.write_text("")
    plan = remote_plan(make_plan, ssh_hosts, "ssh-unknown")
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 4, done.stderr  # refused before anything is touched
    assert "host h1 (127.0.0.1:" in done.stderr and "its host key is not in" in done.stderr
    assert done.stderr.count("\n") == 1 and not (plan.parent / "windows").exists()


def run_cut_mid_start(plan: Path, ssh: SshHosts, kill_server: str | None = None) -> tuple[subprocess.Popen[str], str]:
    """``fairwin run`` with h2's SSH connections cut once B (start s2, on h2) answers: the sshd session processes
    serving fairwin are killed, never the server (unless ``kill_server`` names it: then it is killed first, so it
    dies while fairwin is away). Its return code is the caller's to judge; its stderr."""
    run = subprocess.Popen(
        [sys.executable, "-m", "fairwin", "run", str(plan), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        start_new_session=OWN_SESSION,
    )
    try:
        cut_h2_once_serving(run, plan.parent / "windows", "*/journal.jsonl", ssh, kill_server=kill_server)
        _, err = run.communicate(timeout=180)
    finally:
        run.kill()
    return run, err


def cut_h2_once_serving(
    run: subprocess.Popen[str],
    windows: Path,
    journals: str,
    ssh: SshHosts,
    step: str = "start s2",
    host: str | None = None,
    kill_server: str | None = None,
    wait_s: float = 60,
) -> None:
    """Once the server the step launched (on ``host``, where the role spans hosts) answers and its waves run,
    every SSH connection to h2 drops (the server ``kill_server`` names killed first); ``journals``: the glob under
    ``windows`` of the journals to read the launch from."""
    deadline = time.monotonic() + wait_s
    launched: list[dict[str, Any]] = []
    while not launched:
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()
        time.sleep(0.05)
        launched = [
            e
            for j in windows.glob(journals)
            for e in scan_jsonl(j)[0]
            if e.get("step") == step and e.get("event") == "launched" and host in (None, e.get("host"))
        ]
    argv = launched[0]["argv"]
    port = int(argv[argv.index("--port") + 1])
    while not healthy(port):  # it serves: its warm-up and waves are under way
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()
        time.sleep(0.05)
    time.sleep(1.5)  # its checks are done; its waves run
    for pid in servers_with(kill_server) if kill_server else []:
        os.kill(pid, signal.SIGKILL)
    for session in ssh.hosts[1].sessions():  # the connections to h2 drop
        os.kill(session.pid, signal.SIGKILL)


def healthy(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def lost_plan(make_plan: PlanFactory, ssh: SshHosts, model: str) -> Path:
    """Remote roles A and B (B slow enough that its waves run for seconds), and a production role P here."""
    plan = remote_plan(make_plan, ssh, model, production={"role": "P", **WATCH})
    slow_b = f'"--model", "{model}-b", "--ms-per-round", "20"'
    text = plan.read_text().replace(f'"--model", "{model}-b", "--ms-per-round", "4"', slow_b)
    assert slow_b in text
    p_role = sim_role(model=f"{model}-prod", port=free_port())
    plan.write_text(text + "\n[roles.P]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in p_role.items()))
    return plan


@pytest.mark.slow
def test_a_dropped_ssh_connection_is_reestablished_and_the_window_completes(
    make_plan: PlanFactory, ssh_hosts: SshHosts, stop_production: list[Path]
) -> None:
    plan = lost_plan(make_plan, ssh_hosts, "ssh-drop")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    run, err = run_cut_mid_start(plan, ssh_hosts)
    assert run.returncode in (0, 1), err  # a verdict, whichever: the window measured through the drop
    window = only_window(plan)
    assert status(window)["state"] == "complete"
    events = read_jsonl(window / "journal.jsonl")
    reconnected = [e for e in events if e["event"] == "reconnected"]
    assert reconnected and all(e["step"] == "start s2" and e["host"] == "h2" for e in reconnected), reconnected
    s2 = json.loads((window / "starts" / "s2" / "start.json").read_text())
    assert s2["pooled_rows"] > 0 and s2["stop"]["signal"] == "SIGTERM"  # the server fairwin launched, kept
    assert "fairwin sim: serving ssh-drop-b" in (window / "starts" / "s2" / "h2.log").read_text()
    assert processes_with("ssh-drop-b") == [] and processes_with("ssh-drop-a") == []
    assert status(window)["restore"]["state"] == "RESTORED"


@pytest.mark.slow
def test_with_reconnect_s_0_a_lost_connection_fails_the_start_and_restores_production(
    make_plan: PlanFactory, ssh_hosts: SshHosts, stop_production: list[Path]
) -> None:
    plan = lost_plan(make_plan, ssh_hosts, "ssh-lost")
    plan.write_text(plan.read_text().replace("[hosts.h2]\n", "[hosts.h2]\nreconnect_s = 0\n"))
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    run, err = run_cut_mid_start(plan, ssh_hosts)
    assert run.returncode == 3, err
    assert "role B on host h2: the SSH connection to host h2 was lost" in err and err.count("\n") == 1
    assert "not re-established within 0 s (hosts.h2.reconnect_s)" in err
    window = only_window(plan)
    final = status(window)
    assert final["state"] == "failed" and final["restore"]["state"] == "RESTORED"
    assert processes_with("ssh-lost-b") == [] and processes_with("ssh-lost-a") == []
    assert fairwin("production", "status", str(plan)).returncode == 0


@pytest.mark.slow
def test_recover_stops_a_server_left_on_a_remote_host(make_plan: PlanFactory, ssh_hosts: SshHosts) -> None:
    # Killed right after B's launch, while B still starts: B must outlive the channel its fairwin held.
    plan = remote_plan(make_plan, ssh_hosts, "ssh-kill", orphan_b=True)
    window = killed_inside(plan, start_run(plan, kill_at="start s2:launched"), "start s2:launched")
    assert len(servers_with("ssh-kill-b")) == 1  # left running on h2 by the fairwin that died
    recovered = fairwin("recover", str(plan))
    assert recovered.returncode == 0, recovered.stderr
    assert recovered.stdout.startswith(f"recovered window {window.name}: stopped 1 server process(es)")
    assert processes_with("ssh-kill-b") == [] and status(window)["state"] == "interrupted"


@pytest.mark.slow
def test_production_managed_on_a_remote_host_is_taken_down_and_given_back_over_ssh(
    make_plan: PlanFactory, ssh_hosts: SshHosts, stop_production: list[Path], tmp_path: Path
) -> None:
    port = free_port()
    serve = f"{shlex.quote(sys.executable)} -m fairwin sim --port {port} --model prod-remote"
    production = {
        "host": "h1",  # up, down and must_not_run run there, over SSH
        "up": ["sh", "-c", f"setsid nohup {serve} > {tmp_path / 'prod.log'} 2>&1 < /dev/null &"],
        "down": ["pkill", "-f", "--", "model [p]rod-remote"],  # the bracket keeps pkill off its own shell
        "base_url": f"http://127.0.0.1:{port}",
        "model": "prod-remote",
        "must_not_run": ["--model prod-remote"],
        **WATCH,
    }
    plan = make_plan(
        roles={"A": sim_role(model="exp-remote"), "B": sim_role(model="exp-remote")},
        window={"repeats": 2, "warmup_waves_max": 1},
        production=production,
    )
    with_hosts(plan, ssh_hosts)
    stop_production.append(plan)
    up = fairwin("production", "up", str(plan))
    assert up.returncode == 0 and up.stdout.startswith("UP: ran on host h1: sh -c"), up.stdout + up.stderr
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 0, done.stderr
    window = only_window(plan)
    down = next(
        e for e in read_jsonl(window / "journal.jsonl") if e["step"] == "production down" and e["event"] == "end"
    )
    assert down["how"] == "ran on host h1: pkill -f -- 'model [p]rod-remote'"
    assert status(window)["restore"]["state"] == "RESTORED"
    assert (
        fairwin("production", "status", str(plan)).returncode == 0 and len(processes_with("--model prod-remote")) == 1
    )


@pytest.mark.slow
def test_each_start_samples_the_gpus_of_its_own_host_over_ssh(make_plan: PlanFactory, ssh_hosts: SshHosts) -> None:
    fake = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"  # each host's stand-in nvidia-smi
    roles = {
        "A": sim_role(model="ssh-gpu-a", port=free_port(), host="h1", env={"FAKE_GPU_CAP": "1980"}),
        "B": sim_role(model="ssh-gpu-b", port=free_port(), host="h2", env={"FAKE_GPU_CAP": "1755"}),
    }
    plan = with_hosts(make_plan(roles=roles, window={"repeats": 2, "warmup_waves_max": 1}), ssh_hosts)
    plan.write_text(
        plan.read_text().replace('python = "', f'nvidia_smi = "{fake}"\npython = "')
        + "\n[telemetry]\ninterval_s = 0.3\n"
    )
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 0, done.stderr
    window = only_window(plan)
    s2 = json.loads((window / "starts" / "s2" / "start.json").read_text())["telemetry"]
    assert s2["source"] == "nvidia-smi on host h2" and s2["cap_mhz"] == 1755.0
    decision = json.loads((window / "decision.json").read_text())
    assert decision["verdict"] == "INCONCLUSIVE"
    assert "starts ran at different clock caps" in " ".join(decision["cells"][0]["validity"]["conditions"])


@pytest.mark.slow
def test_servers_on_a_host_are_found_by_their_run_directories_not_by_a_session(
    make_plan: PlanFactory, ssh_hosts: SshHosts, stop_production: list[Path]
) -> None:
    plan = lost_plan(make_plan, ssh_hosts, "ssh-left")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    # Another window's server on h1 (the loopback hosts share this machine and the test's run_dir): not quiet.
    stray = ssh_hosts.run_dir / "fairwin-another-window-s1-A-head"
    stray.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(["setsid", "sh", "-c", f"echo $$ > {stray}/group; exec sleep 120"])
    try:
        while not (stray / "group").exists():
            time.sleep(0.05)
        done = fairwin("run", str(plan), "--quiet")
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
        subprocess.run(["rm", "-rf", str(stray)], check=True)
    assert done.returncode != 0
    assert "the hardware is not quiet before s1: server fairwin-another-window-s1-A-head (group" in done.stderr
    assert "of a fairwin window runs on host h1" in done.stderr

    # A launch cut before its pid was journaled: recover finds the server by its run directory on h2.
    window = killed_inside(plan, start_run(plan, kill_at="start s2:launched"), "start s2:launched")
    journal = window / "journal.jsonl"
    rows = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(r for r in rows if '"launched"' not in r or '"start s2"' not in r))
    assert servers_with("ssh-left-b") != []
    recovered = fairwin("recover", str(plan))
    assert recovered.returncode == 0, recovered.stderr
    stopped = status(window)["recovery"]["stopped"]
    # The loopback hosts share one home: whichever host's sweep came first found it.
    assert any(line.startswith("group ") and f"fairwin-{window.name}-s2-B-head) on host h" in line for line in stopped)
    assert processes_with("ssh-left-b") == [] and not list(ssh_hosts.run_dir.glob(f"*{window.name}*"))


@pytest.mark.slow
def test_a_host_that_asks_for_tmux_runs_each_server_in_a_tmux_session_named_after_it(
    make_plan: PlanFactory, ssh_hosts: SshHosts
) -> None:
    socket = f"fairwin-roles-{os.getpid()}"
    plan = remote_plan(make_plan, ssh_hosts, "ssh-tmux")
    plan.write_text(
        plan.read_text().replace("[hosts.h1]\n", f'[hosts.h1]\ndetach = "tmux"\ntmux_socket = "{socket}"\n')
    )
    run = subprocess.Popen(
        [sys.executable, "-m", "fairwin", "run", str(plan), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=OWN_SESSION,
    )
    seen: set[str] = set()
    try:
        while run.poll() is None:
            listing = ["tmux", "-L", socket, "list-sessions", "-F", "#{session_name}"]
            seen.update(subprocess.run(listing, capture_output=True, text=True, check=False).stdout.split())
            time.sleep(0.1)
        _, err = run.communicate()
        assert run.returncode in (0, 1), err
        window = only_window(plan)
        assert seen == {f"fairwin-{window.name}-s1-A-head", f"fairwin-{window.name}-s3-A-head"}  # h1's starts only
        assert "fairwin sim: serving ssh-tmux-a" in (window / "starts" / "s1" / "h1.log").read_text()
        listing = ["tmux", "-L", socket, "list-sessions"]
        assert subprocess.run(listing, capture_output=True, check=False).returncode != 0  # every session ended
        assert processes_with("ssh-tmux") == []
    finally:
        run.kill()
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, check=False)


@pytest.mark.slow
def test_a_server_that_died_while_its_connection_was_down_fails_the_start(
    make_plan: PlanFactory, ssh_hosts: SshHosts, stop_production: list[Path]
) -> None:
    plan = lost_plan(make_plan, ssh_hosts, "ssh-died")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    run, err = run_cut_mid_start(plan, ssh_hosts, kill_server="ssh-died-b")
    assert run.returncode == 3, err
    # Whichever saw it first: the wave that found no server, or the watch that found its exit once reconnected.
    assert "s2" in err or "role B on host h2" in err, err
    window = only_window(plan)
    failed = [e for e in read_jsonl(window / "journal.jsonl") if e["event"] == "failed"]
    assert failed[0]["step"] == "start s2", failed
    assert status(window)["state"] == "failed" and status(window)["restore"]["state"] == "RESTORED"
    assert not (window / "pooled.jsonl").exists() or "s2" not in (window / "pooled.jsonl").read_text()
    assert processes_with("ssh-died-b") == [] and processes_with("ssh-died-a") == []


def test_a_read_is_asked_again_on_a_new_connection_and_an_action_never_runs_twice(
    ssh_hosts: SshHosts, tmp_path: Path
) -> None:
    """The command seam's retry rule: the first run of each command drops its own connection (its sshd session
    killed under it, as a network blip would); a read is asked again and answers, an action is not run again."""
    import asyncio

    from fairwin.errors import LaunchError
    from fairwin.launch.ssh import run_once
    from fairwin.plan.hosts import Host

    host = Host.model_validate({**ssh_hosts.plan_hosts()["h1"], "reconnect_s": 30.0})
    runs = tmp_path / "runs"

    def dropping_once(name: str) -> str:
        seen = tmp_path / f"{name}.seen"
        return (
            f"echo {name} >> {runs}; if [ -e {seen} ]; then echo answered; "
            f"else touch {seen}; kill -9 $PPID; sleep 5; fi"
        )

    read = asyncio.run(run_once("h1", host, dropping_once("read"), 20.0, retry="read"))
    assert (read.exit_status, str(read.stdout).strip()) == (0, "answered")
    with pytest.raises(LaunchError, match=r"it may have run, so it is not run again: check host h1$"):
        asyncio.run(run_once("h1", host, dropping_once("action"), 20.0, retry="action"))
    assert runs.read_text().split() == ["read", "read", "action"]
