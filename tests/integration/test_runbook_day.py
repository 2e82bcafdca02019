"""The runbook's day as one run (#48): the seed team's archive, qualification, rehearsal, two chained windows under
their own hold with placeholders on both hosts, caps from the servers' logs beside a GPU source, production's cap
from its environment file, and the default rule looking after 3 starts on their imported archive.

Each part has its own tests; this one runs them together, on real processes (`fairwin sim` servers and production
here, placeholders in tmux on two hosts over the loopback sshd, the stand-in nvidia-smi), where the parts meet.
A watchdog re-locks the GPUs between two of the controlled window's starts, which makes it INCONCLUSIVE; the candidate's
checkout is staged before the chain and refused inside it. Not yet in it: roles as containers on the hosts, GPUs read
on each host, an SSH drop (their own tests).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from fairwin.files import read_jsonl, scan_jsonl
from fairwin.launch.spec import free_port
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import fairwin
from tests.integration.production import WATCH
from tests.integration.sshd import SshHosts
from tests.integration.test_chain import placeholders_on_two_hosts, tmux_sessions
from tests.integration.test_gates import QUALIFICATION, admission, carry, git, make_repo
from tests.integration.test_hosts import with_hosts
from tests.integration.test_stage import two_commits

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


@pytest.mark.slow
def test_the_runbooks_day_runs_as_one(
    make_plan: PlanFactory,
    stop_production: list[Path],
    scratch_chain_marker: Path,
    ssh_hosts: SshHosts,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", f"{FIXTURES}:{os.environ['PATH']}")  # their GPUs: the stand-in nvidia-smi
    monkeypatch.setenv("FAKE_GPU_SCOPE", str(tmp_path))
    # THERMAL-WATCH's re-lock: the idle GPUs held at the MHz in this file; the controlled window's control (A) is run
    # under a watchdog that locks them at 1755 when its server stops, and back at 2300 a second into its next launch.
    lock = tmp_path / "gpu-lock"
    lock.write_text("2300\n")
    monkeypatch.setenv("FAKE_GPU_IDLE_LOCK_FILE", str(lock))
    gpu = {"FAKE_GPU_CAP": "2300", "FAKE_GPU_SCOPE": str(tmp_path)}
    # Rounds of 20 ms and the servers at nice 10: a busy machine cannot make the client's timing untrusted.
    a = sim_role("--ms-per-round", "20", model="day-a-cap-2300", env=gpu, nice=10)
    relock = f"trap 'echo 1755 > {lock}' TERM; sleep 1; echo 2300 > {lock}; \"$@\" & wait $!"
    a = {**a, "argv": ["bash", "-c", relock, "watchdog", *a["argv"]]}
    b = sim_role(
        "--ms-per-round",
        "20",
        "--spec-tokens",
        "4",
        "--acceptance",
        "0.9,0.8,0.7,0.6",
        model="day-b-cap-2300",
        env=gpu,
        nice=10,
    )
    p = sim_role(
        "--ms-per-round",
        "20",
        "--spec-tokens",
        "2",
        "--acceptance",
        "0.5",
        model="day-p-cap-2300",
        port=free_port(),
        env=gpu,
        nice=10,
    )
    socket = f"fairwin-day-{os.getpid()}"
    holders = placeholders_on_two_hosts(socket, "hold-day")
    # The candidate's code, pinned at the commit its admission qualified; its checkout has moved on since: stage it.
    checkout, pinned, moved_on = two_commits(tmp_path)
    b = {**b, "repo": {"path": str(checkout), "commit": pinned}}
    plan = make_plan(
        roles={"A": a, "B": b, "P": p},
        window={"rule": None, "repeats": 3, "warmup_waves_max": 1},
        production={"role": "P", "commit": PRODUCTION_COMMIT, **WATCH},
        chain={"placeholders": holders},
    )
    repo = make_repo(tmp_path)
    ledger = tmp_path / "team-hold.log"
    (plan.parent / "gpu.env").write_text("GPU_CLOCK_CAP=2300\n")
    hold = ["sh", "-c", f'echo "hold $FAIRWIN_WINDOW_ID" >> {ledger}']
    release = ["sh", "-c", f'echo "release $FAIRWIN_WINDOW_ID" >> {ledger}']
    qualification = "\n".join(f"{k} = {json.dumps(v)}" for k, v in QUALIFICATION.items())
    plan.write_text(
        plan.read_text()
        + f'\n[qualification]\nrepo = "{repo}"\n{qualification}\n'
        + "\n[telemetry]\ninterval_s = 1.0\ncap_from = \"log\"\ncap_log_pattern = 'cap-(\\d+) on'\n"
        + 'production_cap_file = "gpu.env"\n'
        + f"\n[custody]\nhold_command = {json.dumps(hold)}\nrelease_command = {json.dumps(release)}\n"
        + f'\n[rehearsal]\nurl = "{p["base_url"].replace("{port}", str(p["port"]))}"\nmodel = "day-p-cap-2300"\n'
    )
    plan = with_hosts(plan, ssh_hosts)
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
        assert fairwin("production", "up", str(plan)).returncode == 0
        rehearsal = tmp_path / "rehearsal"
        rehearsed = fairwin("rehearse", str(plan), "--out", str(rehearsal))
        assert rehearsed.returncode == 0, rehearsed.stdout + rehearsed.stderr
        gates = ("--qualification", str(carried), "--require-rehearsal", str(rehearsal))
        staged = fairwin("stage", str(plan), "--mode", "controlled", "--to", str(tmp_path / "stage.json"))
        assert staged.returncode == 0, staged.stderr
        assert git(checkout, "rev-parse", "HEAD") == pinned != moved_on

        # The chain: production-policy, then controlled, the last.
        first = fairwin("run", str(plan), "--mode", "production-policy", "--chain", *gates)
        assert first.returncode == 0, first.stderr
        assert "to the first look (after 3 starts)" in first.stderr
        assert tmux_sessions(socket) == ["fairwin-hold-hold1", "fairwin-hold-hold2"]  # both hosts held
        between = fairwin("stage", str(plan), "--to", str(tmp_path / "between.json"))  # never inside a chain
        assert between.returncode == 4 and "a chain is in progress" in between.stderr, between.stderr
        last = fairwin("run", str(plan), "--mode", "controlled", "--chain-last", *gates)
        assert last.returncode == 0, last.stderr
        assert "to the first look (after 3 starts)" in last.stderr
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
        assert manifest["telemetry"]["production_cap_mhz"] == 2300.0
    held = next(e for e in read_jsonl(w1 / "journal.jsonl") if e["step"] == "chain hold" and e["event"] == "end")
    assert held["placeholders_started"] == "before the last start's servers stopped"
    # One team hold across the chain, released once, after the restore that ended it.
    assert ledger.read_text().splitlines() == [f"hold {w1.name}", f"release {w2.name}"]
    status = json.loads((w2 / "status.json").read_text())
    assert status["restore"]["state"] == "RESTORED" and status["chain"]["end"] == "ENDED"
    assert status["team_release"]["released"] is True
    # The re-lock between two of the controlled window's starts, seen by the GPUs against the caps the logs gave.
    decision = json.loads((w2 / "decision.json").read_text())
    conditions = " ".join((decision["cells"][0]["validity"] or {}).get("conditions") or [])
    a_stopped = next(s["start"] for s in json.loads((w2 / "window.json").read_text())["starts"] if s["role"] == "A")
    gap = f"before s{int(a_stopped[1:]) + 1}"  # the gap after A's first start: the order was drawn, then alternated
    relocked = f"the clock cap changed between starts, {gap}: GPU-fake-0 2300 -> 1755 -> 2300 MHz"
    assert decision["verdict"] == "INCONCLUSIVE" and relocked in conditions, conditions
    first_validity = json.loads((w1 / "decision.json").read_text())["cells"][0]["validity"]
    assert first_validity["conditions"] == []  # P ran under no watchdog: its gaps held the cap
    ends = [(e["end"], e["window_id"]) for e in read_jsonl(plan.parent / "windows" / "chains.jsonl")]
    assert ends == [("CHAINED", w1.name), ("ENDED", w2.name)]
    assert not scratch_chain_marker.exists() and tmux_sessions(socket) == []
    assert fairwin("production", "status", str(plan)).returncode == 0
    # Every control start of both windows joined their archive, keyed as the next windows will match them.
    own = [r for r in read_jsonl(archive) if r["window_id"] in (w1.name, w2.name)]
    assert {(r["mode"], r["role"], r["clock_cap_mhz"], r["production_commit"]) for r in own} == {
        ("production-policy", "P", 2300.0, PRODUCTION_COMMIT),
        ("controlled", "A", 2300.0, PRODUCTION_COMMIT),
    }
