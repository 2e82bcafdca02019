"""The runbook's day as one run (#48): the seed team's archive, qualification, rehearsal, two chained windows under
their own hold with placeholders on both hosts, caps from the servers' logs beside each host's GPUs, production's
cap from each host's environment file, and the default rule looking after 3 starts on their imported archive.

Each part has its own tests; this one runs them together, on real processes where the parts meet: two hosts over
the loopback sshd (h1 the head, h2 the worker, as their two Sparks), production and every role as podman containers
on both (a head on h1 after its worker on h2, host networking), each host's GPUs read by its own stand-in
nvidia-smi and a clock watchdog's log, placeholders in tmux on both hosts. A watchdog re-locks h1's GPUs between
two of the controlled window's starts, seen by the GPUs and in its log, which makes that window INCONCLUSIVE; every
SSH connection to h2 is cut while a start's containers serve, and the window measures on; the candidate's checkout
is staged before the chain and refused inside it.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from fairwin.files import read_jsonl, scan_jsonl
from tests.conftest import PlanFactory, sim_role
from tests.integration.containers import IMAGE, Engine, sim_mounts
from tests.integration.helpers import fairwin
from tests.integration.production import WATCH, start_run
from tests.integration.sshd import SshHosts
from tests.integration.test_chain import placeholders_on_two_hosts, tmux_sessions
from tests.integration.test_gates import QUALIFICATION, admission, carry, git, make_repo
from tests.integration.test_hosts import cut_h2_once_serving
from tests.integration.test_stage import two_commits
from tests.ports import free_port

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PRODUCTION_COMMIT = "9f1c2ab"

MAP = """\
[control]
field = "role"
equals = ["OFF"]

[fields]
window_id = "hold"
time = "unix"
start = "start"
cell = "cell"
mode = "mode"
role = "fairwin_role"
production_commit = "prod"
max_tokens = "max_tokens"
clock_cap_mhz = "cap"

[values]
temperature = 1.0

[cells.short-b1]
prompt_tokens = 64
concurrency = 1

[repeats.metrics]
pooled_rate_tps = "rate"
accepted_per_round = "acc"
decode_tps = "decode"
"""


def their_archive(path: Path) -> Path:
    """Their control-archive as a CSV, one row per repeat: 12 holds of each mode, cap 2300 per start from its log."""
    rng = random.Random(48)
    lines = ["hold,unix,start,role,fairwin_role,mode,cell,prod,max_tokens,cap,rate,acc,decode"]
    for mode, control in (("production-policy", "P"), ("controlled", "A")):
        for hold in range(12):
            for start, kind in ((1, "OFF"), (2, "ON")):
                level = 1.0 + rng.gauss(0, 0.01)
                for repeat in range(3):
                    rate = 480 * level * (1 + rng.gauss(0, 0.005))
                    when = 1_762_000_000 + hold * 86_400 + start * 600 + repeat * 60 + (0 if control == "A" else 7)
                    lines.append(
                        f"{mode}-{hold},{when},{start},{kind},{control},{mode},short-b1,{PRODUCTION_COMMIT},48,2300,"
                        f"{rate:.2f},1.0,{rate + 9:.2f}"
                    )
    path.write_text("\n".join(lines) + "\n")
    return path


class Day:
    """The day's two hosts as the team has them: each with its GPUs (a stand-in nvidia-smi seeing only the servers
    and workers whose FAKE_GPU_SCOPE is that host's), an idle lock a watchdog may rewrite, and podman."""

    def __init__(self, tmp_path: Path, engine: Engine) -> None:
        self.tmp, self.engine = tmp_path, engine
        self.scope = {host: tmp_path / f"gpus-{host}" for host in ("h1", "h2")}
        self.lock = {host: tmp_path / f"gpu-lock-{host}" for host in ("h1", "h2")}
        for host in ("h1", "h2"):
            self.lock[host].write_text("2300\n")  # `nvidia-smi -lgc 2300`: the idle GPUs held at the cap
            self.scope[host].mkdir()  # where that host's stand-in keeps what it counts

    def hosts(self, ssh: SshHosts) -> str:
        """The plan's [hosts] tables, each host with its own nvidia-smi."""
        tables = ""
        for name, table in ssh.plan_hosts().items():
            smi = self.tmp / f"nvidia-smi-{name}"
            smi.write_text(
                f"#!/bin/sh\nFAKE_GPU_SCOPE={self.scope[name]} FAKE_GPU_IDLE_LOCK_FILE={self.lock[name]} "
                f'exec {FIXTURES / "nvidia-smi"} "$@"\n'
            )
            smi.chmod(0o755)
            table = {**table, "nvidia_smi": str(smi)}
            tables += f"\n[hosts.{name}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in table.items())
        return tables

    def gpu_env(self, host: str) -> dict[str, str]:
        return {"FAKE_GPU_CAP": "2300", "FAKE_GPU_SCOPE": str(self.scope[host])}

    def box(self) -> dict[str, object]:
        return {**self.engine.sim_container(), "mounts": self.mounts()}

    def mounts(self) -> list[str]:
        """The sim's, and this test's directory read-write (the watchdog's lock file, the stand-in GPUs' scope)."""
        return [*sim_mounts(), f"{self.tmp}:{self.tmp}"]

    def role(self, name: str, *flags: str, head_argv: list[str] | None = None) -> dict[str, object]:
        """A role as their servers run: its head in a container on h1, after its worker's container on h2 is ready;
        both at nice 10 and rounds of 20 ms, so a busy machine cannot make the client's timing untrusted."""
        model = f"day-{name}-cap-2300"
        role = sim_role("--ms-per-round", "20", *flags, model=model, port=free_port(), host="h1",
                        env=self.gpu_env("h1"), container=self.box())  # fmt: skip
        argv = ["nice", "-n", "10", *role["argv"]]
        role["argv"] = [*head_argv, *argv] if head_argv else argv
        worker_port = free_port()
        role["workers"] = [{
            "host": "h2",
            "argv": ["nice", "-n", "10", "{python}", "-m", "fairwin", "sim", "--port", str(worker_port),
                     "--model", f"day-{name}-worker-cap-2300"],
            "env": self.gpu_env("h2"),
            "container": self.box(),
            "ready": {"log": "serving", "port": worker_port, "timeout_s": 30},
        }]  # fmt: skip
        return role

    def production(self, port: int, flags: list[str]) -> dict[str, object]:
        """Production as their serve.sh keeps it: two containers (the head on h1, its worker on h2), brought up and
        taken down by their own commands on h1, read live by the runtime on each host."""
        env = " ".join(f"{k}={v}" for k, v in self.engine.env.items())
        mounts = " ".join(f"-v {m}" for m in self.mounts())
        python = sys.executable

        def run(name: str, host: str, argv: str) -> str:
            gpu = " ".join(f"-e {k}={v}" for k, v in self.gpu_env(host).items())
            return f"podman run -d --name {name} --network host --init {mounts} {gpu} {IMAGE} nice -n 10 {argv}"

        worker_port = free_port()
        up = self.tmp / "serve.sh"
        up.write_text(
            f"#!/bin/sh\nset -e\nexport {env}\npodman rm -f day-prod-head day-prod-worker >/dev/null 2>&1 || true\n"
            + run("day-prod-worker", "h2", f"{python} -m fairwin sim --port {worker_port} --model day-prod-worker")
            + "\n"
            + run("day-prod-head", "h1", f"{python} -m fairwin sim --port {port} --model day-prod " + " ".join(flags))
            + "\n"
        )
        down = self.tmp / "stop.sh"
        down.write_text(f"#!/bin/sh\nexport {env}\npodman stop -t 5 day-prod-head day-prod-worker >/dev/null\n")
        live: dict[str, object] = {"runtime": "podman", "runtime_env": self.engine.env}
        head: dict[str, object] = {"container": "day-prod-head", **live}
        worker: dict[str, object] = {"host": "h2", "container": "day-prod-worker", **live}
        settings: dict[str, object] = {
            "host": "h1",
            "up": ["sh", str(up)],
            "down": ["sh", str(down)],
            "base_url": f"http://127.0.0.1:{port}",
            "model": "day-prod",
            "commit": PRODUCTION_COMMIT,
            "must_not_run": ["model day-prod"],
            "hardware_lock": str(self.tmp / "hardware.lock"),
            "live": {"head": head, "workers": [worker]},
        }
        return {**settings, **WATCH}


@pytest.mark.slow
def test_the_runbooks_day_runs_as_one(
    make_plan: PlanFactory,
    stop_production: list[Path],
    scratch_chain_marker: Path,
    ssh_hosts: SshHosts,
    container_engine: Engine,
    tmp_path: Path,
) -> None:
    day = Day(tmp_path, container_engine)
    # THERMAL-WATCH's re-lock: the controlled window's control (A) runs under a watchdog that locks h1's idle GPUs
    # at 1755 when its server stops, and back at 2300 a second into its next launch.
    lock = day.lock["h1"]
    watched = {host: tmp_path / f"watchdog-{host}.log" for host in ("h1", "h2")}  # each Spark's THERMAL-WATCH log
    for log in watched.values():
        log.write_text("watchdog: started\n")
    relock = (
        f"trap 'echo 1755 > {lock}; echo \"relocked 1755\" >> {watched['h1']}' TERM; "
        f'sleep 1; echo 2300 > {lock}; echo "relocked 2300" >> {watched["h1"]}; "$@" & wait $!'
    )
    a = day.role("a", head_argv=["bash", "-c", relock, "watchdog"])
    b = day.role("b", "--spec-tokens", "4", "--acceptance", "0.9,0.8,0.7,0.6")
    policy = ["--ms-per-round", "20", "--spec-tokens", "2", "--acceptance", "0.5"]
    p = {**day.role("p", *policy[2:]), "compare_live": True}  # production's policy on the experiment's runtime
    socket = f"fairwin-day-{os.getpid()}"
    holders = placeholders_on_two_hosts(socket, "hold-day")
    # The candidate's code, pinned at the commit its admission qualified; its checkout has moved on since: stage it.
    checkout, pinned, moved_on = two_commits(tmp_path)
    b = {**b, "repo": {"path": str(checkout), "commit": pinned}}
    production_port = free_port()
    plan = make_plan(
        roles={"A": a, "B": b, "P": p},
        window={"rule": None, "repeats": 3, "warmup_waves_max": 1},
        production=day.production(production_port, policy),
        chain={"placeholders": holders},
    )
    repo = make_repo(tmp_path)
    ledger = tmp_path / "team-hold.log"
    (tmp_path / "environment").write_text("GPU_CLOCK_CAP=2300\n")  # each Spark's /etc/environment
    hold = ["sh", "-c", f'echo "hold $FAIRWIN_WINDOW_ID" >> {ledger}']
    release = ["sh", "-c", f'echo "release $FAIRWIN_WINDOW_ID" >> {ledger}']
    qualification = "\n".join(f"{k} = {json.dumps(v)}" for k, v in QUALIFICATION.items())
    plan.write_text(
        plan.read_text()
        + f'\n[qualification]\nrepo = "{repo}"\n{qualification}\n'
        + "\n[telemetry]\ninterval_s = 1.0\ncap_from = \"log\"\ncap_log_pattern = 'cap-(\\d+) on'\n"
        + f'production_cap_file = "{tmp_path / "environment"}"\n'
        + f"watchdog_logs = {{ h1 = {json.dumps(str(watched['h1']))}, h2 = {json.dumps(str(watched['h2']))} }}\n"
        + "watchdog_pattern = 'relocked'\n"
        + f"\n[custody]\nhold_command = {json.dumps(hold)}\nrelease_command = {json.dumps(release)}\n"
        + f'\n[rehearsal]\nurl = "http://127.0.0.1:{production_port}"\nmodel = "day-prod"\n'
        + day.hosts(ssh_hosts)
    )
    stop_production.append(plan)
    archive = plan.parent / "windows" / "control-archive.jsonl"
    try:
        # Their archive, as theirs is shaped; their admission, carried to HEAD; the rehearsal against production.
        (tmp_path / "map.toml").write_text(MAP)
        imported = fairwin("archive", "import", str(their_archive(tmp_path / "theirs.csv")), "--map",
                           str(tmp_path / "map.toml"), "--archive", str(archive))  # fmt: skip
        assert imported.returncode == 0 and "imported 24 control starts of 24 windows" in imported.stdout, imported
        q = git(repo, "rev-parse", "HEAD")
        carried = tmp_path / "carried.json"
        assert carry(plan, admission(tmp_path, repo, q), q, carried).returncode == 0
        up = fairwin("production", "up", str(plan))
        assert up.returncode == 0, up.stderr
        assert container_engine.podman("ps", "--format", "{{.Names}}").stdout.split() == [
            "day-prod-worker",
            "day-prod-head",
        ]
        rehearsal = tmp_path / "rehearsal"
        rehearsed = fairwin("rehearse", str(plan), "--out", str(rehearsal))
        assert rehearsed.returncode == 0, rehearsed.stdout + rehearsed.stderr
        gates = ("--qualification", str(carried), "--require-rehearsal", str(rehearsal))
        staged = fairwin("stage", str(plan), "--mode", "controlled", "--to", str(tmp_path / "stage.json"))
        assert staged.returncode == 0, staged.stderr
        assert git(checkout, "rev-parse", "HEAD") == pinned != moved_on

        # The chain: production-policy, then controlled, the last, with h2's connections cut during its s2.
        first = fairwin("run", str(plan), "--mode", "production-policy", "--chain", *gates)
        assert first.returncode == 0, first.stderr
        assert "to the first look (after 3 starts)" in first.stderr
        assert tmux_sessions(socket) == ["fairwin-hold-hold1", "fairwin-hold-hold2"]  # both hosts held
        between = fairwin("stage", str(plan), "--to", str(tmp_path / "between.json"))  # never inside a chain
        assert between.returncode == 4 and "a chain is in progress" in between.stderr, between.stderr
        last = start_run(plan, "--mode", "controlled", "--chain-last", *gates)
        try:
            # Once s2's head (on h1, after its worker on h2 was ready) answers: h2's connections drop.
            cut_h2_once_serving(
                last, plan.parent / "windows", "*-controlled-*/journal.jsonl", ssh_hosts, host="h1", wait_s=120
            )
            _, err = last.communicate(timeout=300)
        finally:
            last.kill()
        assert last.returncode == 0, err
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)

    windows = sorted(p for p in (plan.parent / "windows").iterdir() if p.is_dir() and not p.name.startswith("."))
    assert len(windows) == 2
    w1, w2 = windows
    for window in windows:
        journal = scan_jsonl(window / "journal.jsonl")[0]
        looked = next(e for e in journal if e["step"] == "look after s3" and e["event"] == "end")
        assert looked.get("taken", True) is not False, looked  # the imported archive feeds the look after 3
        manifest = json.loads((window / "window.json").read_text())
        assert manifest["gates"]["qualification"]["path"] == str(carried) and manifest["gates"]["rehearsal"]
        # Production's cap from each Spark's own environment file, both agreeing; production read on both hosts.
        assert manifest["telemetry"]["production_caps_by_host"] == {"h1": 2300.0, "h2": 2300.0}
        assert manifest["telemetry"]["production_cap_from"].endswith("environment on host h1: GPU_CLOCK_CAP")
        assert [(m["member"], m["found_by"]) for m in manifest["production"]["live"]["members"]] == [
            ("head", "container day-prod-head (podman)"),
            ("worker 1", "container day-prod-worker (podman)"),
        ]
        quiet = [e for e in journal if e["step"] in ("quiet", "quiet after") and e["event"] == "end"]
        assert [sorted(e["gpus_read"]) for e in quiet] == [["h1", "h2"]] * 2 and all(
            not e["gpus_unread"] for e in quiet
        )
        for receipt in sorted((window / "starts").glob("s*/start.json")):  # both hosts' GPUs read at every start
            telemetry = json.loads(receipt.read_text())["telemetry"]
            assert telemetry["source"] == "nvidia-smi on host h2 + nvidia-smi on host h1", telemetry
            assert telemetry["cap_by_host"] == {"h1": 2300.0, "h2": 2300.0} and telemetry["failed_reads"] == 0
    checked = [json.loads(r.read_text()) for r in sorted((w1 / "starts").glob("s*/start.json"))]
    live_checks = {tuple(r["env_check"]) for r in checked if r["role"] == "P"}  # the runbook's runtime(), each P
    assert live_checks == {
        (
            "role P worker 1 on host h2: matches production's worker 1 on host h2 beyond its allowed differences",
            "matches production's head on host h1 beyond its allowed differences",
        )
    }
    held = next(e for e in read_jsonl(w1 / "journal.jsonl") if e["step"] == "chain hold" and e["event"] == "end")
    assert held["placeholders_started"] == "before the last start's servers stopped"
    # One team hold across the chain, released once, after the restore that ended it.
    assert ledger.read_text().splitlines() == [f"hold {w1.name}", f"release {w2.name}"]
    status = json.loads((w2 / "status.json").read_text())
    assert status["restore"]["state"] == "RESTORED" and status["chain"]["end"] == "ENDED"
    assert status["team_release"]["released"] is True
    # The dropped connections to h2, during s2's containers, reconnected; the start measured.
    reconnected = [e for e in read_jsonl(w2 / "journal.jsonl") if e["event"] == "reconnected"]
    assert reconnected and {(e["step"], e["host"]) for e in reconnected} == {("start s2", "h2")}, reconnected
    assert json.loads((w2 / "starts" / "s2" / "start.json").read_text())["pooled_rows"] > 0
    # The re-lock between two of the controlled window's starts, seen on h1's GPUs against the caps the logs gave.
    decision = json.loads((w2 / "decision.json").read_text())
    conditions = " ".join((decision["cells"][0]["validity"] or {}).get("conditions") or [])
    a_stopped = next(s["start"] for s in json.loads((w2 / "window.json").read_text())["starts"] if s["role"] == "A")
    gap = f"before s{int(a_stopped[1:]) + 1}"  # the gap after A's first start: the order was drawn, then alternated
    relocked = f"the clock cap changed between starts, {gap}: h1/GPU-fake-0 2300 -> 1755 -> 2300 MHz"
    assert decision["verdict"] == "INCONCLUSIVE" and relocked in conditions, conditions
    watchdog = "the clock watchdog on h1 logged during the window: relocked 2300 | relocked 1755"
    assert watchdog in conditions and "watchdog on h2" not in conditions, conditions  # and h2's watchdog was quiet
    decided = json.loads((w1 / "decision.json").read_text())
    assert decided["cells"][0]["validity"]["conditions"] == []  # P ran under no watchdog: its gaps held the cap
    # The production-policy window decided at its look after 3 starts, on their archive's spread.
    assert (
        decided["verdict"],
        decided["sequential"]["ended"],
        [look["after"] for look in decided["sequential"]["looks"]],
    ) == ("WIN", "decided", [3])
    ends = [(e["end"], e["window_id"]) for e in read_jsonl(plan.parent / "windows" / "chains.jsonl")]
    assert ends == [("CHAINED", w1.name), ("ENDED", w2.name)]
    assert not scratch_chain_marker.exists() and tmux_sessions(socket) == []
    assert fairwin("production", "status", str(plan)).returncode == 0
    assert container_engine.names("fairwin.window") == []  # every role's container gone; production's serve on
    # Every control start of both windows joined their archive, keyed as the next windows will match them.
    own = [r for r in read_jsonl(archive) if r["window_id"] in (w1.name, w2.name)]
    assert {(r["mode"], r["role"], r["clock_cap_mhz"], r["production_commit"]) for r in own} == {
        ("production-policy", "P", 2300.0, PRODUCTION_COMMIT),
        ("controlled", "A", 2300.0, PRODUCTION_COMMIT),
    }
