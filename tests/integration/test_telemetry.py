"""GPU telemetry through a whole window, from a stand-in nvidia-smi on PATH (tests/fixtures/nvidia-smi) whose
two GPUs follow what runs on them: one start at another clock cap, and dialled back for heat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fairwin.files import read_jsonl
from fairwin.plan import load_plan
from fairwin.plan.site import Site
from fairwin.telemetry.cap import production_caps
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import fairwin, only_window, status
from tests.integration.sshd import SshHosts
from tests.integration.test_hosts import with_hosts
from tests.ports import free_port

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.slow
def test_a_start_at_another_cap_with_a_thermal_dialback_makes_the_window_inconclusive(
    make_plan: PlanFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{FIXTURES}:{os.environ['PATH']}")
    plan = make_plan(
        roles={
            "A": sim_role("--ms-per-round", "10", model="gpu-a", env={"FAKE_GPU_CAP": "1980"}),
            "B": sim_role(
                "--ms-per-round",
                "10",
                model="gpu-b",
                env={"FAKE_GPU_CAP": "1755", "FAKE_GPU_THERMAL_AFTER_REQUESTS": "2"},
            ),
        },
        window={"repeats": 2, "warmup_waves_max": 1},
    )
    (plan.parent / "gpu.env").write_text("GPU_CLOCK_CAP=1980\n")
    plan.write_text(plan.read_text() + '\n[telemetry]\ninterval_s = 0.2\nproduction_cap_file = "gpu.env"\n')
    done = fairwin("run", str(plan), "--mode", "controlled")
    assert done.returncode == 0, done.stderr
    assert "GPU telemetry: nvidia-smi" in done.stderr
    window = only_window(plan)
    decision = json.loads((window / "decision.json").read_text())
    assert decision["verdict"] == "INCONCLUSIVE"
    (cell,) = decision["cells"]
    assert cell["validity"] is not None, cell["reasons"]
    conditions = " ".join(cell["validity"]["conditions"])
    assert "starts ran at different clock caps" in conditions
    assert "cap differs from production's 1980 MHz in {'s2': 1755.0}" in conditions
    assert "the clock was dialled back inside the window: {'s2': 2} events" in conditions  # one per GPU
    rows = read_jsonl(window / "pooled.jsonl")
    assert {r["start"]: r["clock_cap_mhz"] for r in rows} == {"s1": 1980.0, "s2": 1755.0, "s3": 1980.0}
    assert sum(r["thermal_events"] for r in rows if r["start"] == "s2") == 2
    assert all(r["thermal_events"] == 0 for r in rows if r["start"] != "s2")
    s2 = json.loads((window / "starts" / "s2" / "start.json").read_text())["telemetry"]
    assert s2["cap_by_gpu"] == {"GPU-fake-0": 1755.0, "GPU-fake-1": 1755.0}
    assert [(d["gpu"], d["kind"]) for d in s2["dialbacks"]] == [(0, "thermal"), (1, "thermal")]
    samples = read_jsonl(window / "starts" / "s2" / "telemetry.jsonl")
    assert len(samples) >= 2 * 5 and {s["format"] for s in samples} == {"fairwin.telemetry/1"}
    summary = (window / "summary.md").read_text()
    assert "## GPU telemetry" in summary and "| s2 | nvidia-smi |" in summary and "thermal on GPU 0" in summary
    manifest = json.loads((window / "window.json").read_text())
    assert manifest["telemetry"]["production_cap_mhz"] == 1980.0
    assert manifest["telemetry"]["production_caps_by_host"] == {"here": 1980.0}
    context = json.loads((window / "context.json").read_text())
    assert context["production_caps_by_host"] == {"here": 1980.0}  # each host's own cap reaches the decision


@pytest.mark.slow
def test_a_compute_process_on_the_gpus_fails_the_quiet_proof_before_anything_is_measured(
    make_plan: PlanFactory, monkeypatch: pytest.MonkeyPatch, stop_production: list[Path]
) -> None:
    from tests.integration.production import production_plan

    monkeypatch.setenv("PATH", f"{FIXTURES}:{os.environ['PATH']}")
    plan = production_plan(make_plan, "gpu-quiet")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    # Someone else's job holds the GPUs (the stand-in nvidia-smi lists it as a compute process).
    stray = subprocess.Popen(
        [sys.executable, "-m", "fairwin", "sim", "--port", str(free_port()), "--model", "stray"],
        env={**os.environ, "FAKE_GPU_CAP": "1980"},
        stdout=subprocess.DEVNULL,
    )
    try:
        done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    finally:
        stray.kill()
        stray.wait()
    assert done.returncode == 3, done.stderr
    assert f"the hardware is not quiet before s1: pid {stray.pid} (python3) computes on GPU GPU-fake-0" in done.stderr
    window = only_window(plan)
    assert not (window / "starts" / "s1").exists() and status(window)["restore"]["state"] == "RESTORED"


@pytest.mark.slow
def test_a_relock_mid_start_and_a_dialback_between_starts_are_both_seen(
    make_plan: PlanFactory, monkeypatch: pytest.MonkeyPatch, stop_production: list[Path]
) -> None:
    """The stand-in's watchdog locks s2's GPUs lower part-way through it, and the GPUs slow for heat whenever
    nothing runs on them: the change of cap leaves s2 without one, and the hold's own samples see the
    dial-backs between starts."""
    from tests.integration.production import production_plan

    monkeypatch.setenv("PATH", f"{FIXTURES}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GPU_IDLE_THERMAL", "1")  # the stand-in nvidia-smi runs with fairwin's environment
    loading = {"FAKE_GPU_CAP": "1980", "FAKE_GPU_IDLE_FIRST_READS": "1"}  # idle (and hot) while a server loads
    # The watchdog re-locks once s2's server has finished its two warm-up requests and its first measured one: its
    # own sampler has read the cap before, and its last wave and last read come after, however slow the machine.
    relock = {**loading, "FAKE_GPU_RELOCK_AFTER_REQUESTS": "2", "FAKE_GPU_RELOCK_MHZ": "1755"}
    plan = production_plan(
        make_plan,
        "gpu-relock",
        A=sim_role("--ms-per-round", "10", model="exp-gpu-relock", env=loading),
        B=sim_role("--ms-per-round", "100", model="exp-gpu-relock", env=relock),  # its waves take seconds
    )
    plan.write_text(plan.read_text() + "\n[telemetry]\ninterval_s = 0.2\n")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    done = fairwin("run", str(plan), "--mode", "controlled")
    assert done.returncode == 0, done.stderr
    window = only_window(plan)
    s2 = json.loads((window / "starts" / "s2" / "start.json").read_text())["telemetry"]
    assert {(c["before_mhz"], c["after_mhz"]) for c in s2["cap_changes"]} == {(1980.0, 1755.0)}
    assert s2["cap_mhz"] is None and s2["cap_by_host"] == {"here": None}
    decision = json.loads((window / "decision.json").read_text())
    assert decision["verdict"] == "INCONCLUSIVE"
    assert decision["cells"][0]["validity"] is not None, decision["cells"][0]["reasons"]
    conditions = decision["cells"][0]["validity"]["conditions"]
    assert "clock cap missing (or varying) in s2" in conditions
    between = next(c for c in conditions if c.startswith("the clock was dialled back between starts: "))
    context = json.loads((window / "context.json").read_text())
    gaps = set(context["between_starts_dialbacks"])
    assert all(f"'{gap}': " in between for gap in gaps), between
    # Each start's servers stopped, the hold reads the GPUs at once: every gap is seen, however short and busy
    # the machine (a 0.2 s loop alone missed gaps on a loaded CI runner).
    assert gaps >= {"before s2", "before s3", "after s3"} and gaps <= {
        "before s1",
        "before s2",
        "before s3",
        "after s3",
    }
    assert (window / "hold-telemetry.jsonl").stat().st_size > 0


@pytest.mark.slow  # in make test; test-fast keeps the quicker cases of the same feature
def test_caps_from_the_logs_of_two_hosts_without_any_gpu_source_name_the_host_at_another_cap(
    make_plan: PlanFactory, ssh_hosts: SshHosts
) -> None:
    """No NVML, no nvidia-smi: each process's log names its cap (the head here says 2300, its worker on h1 says
    2150, in every start); the window is INCONCLUSIVE and says which host."""
    worker = {
        "host": "h1",
        "argv": [
            sys.executable,
            "-c",
            "print('fairwin sim: serving cap-2150 on h1', flush=True); import time; time.sleep(600)",
        ],
    }
    role = sim_role("--ms-per-round", "2", model="cap-2300", workers=[worker])
    plan = make_plan(
        roles={"A": role, "B": role}, window={"repeats": 2, "warmup_waves_max": 1, "production_clock_cap_mhz": 2300}
    )
    quiet_watchdogs = {host: plan.parent / f"watchdog-{host}.log" for host in ("here", "h1")}  # they log nothing
    for log in quiet_watchdogs.values():
        log.write_text("watchdog started\n")
    plan.write_text(
        plan.read_text() + '\n[telemetry]\ngpu = "none"\ncap_from = "log"\n'
        "cap_log_pattern = 'serving cap-(\\d+) on'\n"
        f'watchdog_logs = {{ here = "{quiet_watchdogs["here"]}", h1 = "{quiet_watchdogs["h1"]}" }}\n'
    )
    plan = with_hosts(plan, ssh_hosts)
    refused = fairwin("run", str(plan), "--mode", "controlled")  # nothing reads either host's GPUs
    assert refused.returncode == 4, refused.stderr
    assert "the quiet proof cannot read the GPUs of host here, host h1 (no GPU source there)" in refused.stderr
    plan.write_text(plan.read_text() + '\n[runtime]\naccept_unobserved = ["gpus"]\n')
    done = fairwin("run", str(plan), "--mode", "controlled")
    assert done.returncode == 0, done.stderr
    window = only_window(plan)
    decision = json.loads((window / "decision.json").read_text())
    assert decision["verdict"] == "INCONCLUSIVE"
    conditions = decision["cells"][0]["validity"]["conditions"]
    assert "hosts ran at different clock caps (h1 at 2150 MHz, here at 2300 MHz) in s1, s2, s3" in conditions
    assert "host h1 ran at 2150 MHz, its configured cap is 2300 MHz in s1, s2, s3" in conditions
    rows = read_jsonl(window / "pooled.jsonl")
    assert {json.dumps(r["clock_caps_by_host"], sort_keys=True) for r in rows} == {'{"h1": 2150.0, "here": 2300.0}'}
    telemetry = json.loads((window / "starts" / "s1" / "start.json").read_text())["telemetry"]
    assert telemetry["source"] == "none" and telemetry["cap_by_host"] == {"h1": 2150.0, "here": 2300.0}
    # Caps from the logs, dial-backs from each host's watchdog log: nothing of the clocks went unobserved; the GPUs
    # nothing could read are named, as accepted.
    assert decision["unobserved"] == [
        "GPUs (here; h1): the quiet proof read none there; accepted by runtime.accept_unobserved"
    ], decision["unobserved"]
    assert json.loads((window / "context.json").read_text())["watchdog_events"] is None


def test_productions_configured_cap_is_read_on_every_host_from_its_own_file(
    make_plan: PlanFactory, ssh_hosts: SshHosts
) -> None:
    """A relative cap file is the plan directory's here and the login's home on h1: two nodes, two files."""
    name = f"fairwin-cap-{os.getpid()}.env"
    plan = with_hosts(make_plan(roles={"A": sim_role(), "B": sim_role(host="h1", port=free_port())}), ssh_hosts)
    plan.write_text(plan.read_text() + f'\n[telemetry]\nproduction_cap_file = "{name}"\n')
    (plan.parent / name).write_text("GPU_CLOCK_CAP=2300\n")
    on_h1 = Path.home() / name  # the loopback h1's login home is this user's
    on_h1.write_text("PATH=/usr/bin\nGPU_CLOCK_CAP=2150\n")
    try:
        site = Site.of(load_plan(plan), {"A", "B"})
        assert production_caps(site) == {"here": 2300.0, "h1": 2150.0}
        on_h1.unlink()
        assert production_caps(site) == {"here": 2300.0, "h1": None}  # no file of its own there
    finally:
        on_h1.unlink(missing_ok=True)


@pytest.mark.slow
@pytest.mark.parametrize("cap_from", ["locked", "log"])
def test_a_relock_between_starts_makes_the_window_inconclusive_and_the_watchdogs_log_names_it(
    make_plan: PlanFactory, monkeypatch: pytest.MonkeyPatch, stop_production: list[Path], tmp_path: Path, cap_from: str
) -> None:
    """A watchdog re-locks the idle GPUs 1980 -> 1755 MHz whenever a server stops, and back to 1980 a second
    into the next launch: every start runs at 1980, yet each gap between them ran at 1755. The hold's samples
    see it, whether the caps are read as the GPUs' locked clocks or from the servers' `serving cap-N` lines
    (the runbook's `clock cap N MHz`), and so does the watchdog's own log, which the plan names (only its
    matching lines count)."""
    from tests.integration.production import production_plan

    lock, log = tmp_path / "gpu-lock", tmp_path / "watchdog.log"
    lock.write_text("1980\n")
    log.write_text("watchdog: started\n")  # before the window: not one of its events
    monkeypatch.setenv("PATH", f"{FIXTURES}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GPU_IDLE_LOCK_FILE", str(lock))  # the stand-in runs with fairwin's environment
    relock = (
        f'trap \'echo 1755 > {lock}; echo "watchdog: relocked 1980 -> 1755 MHz" >> {log}; '
        f'echo "watchdog: all well" >> {log}\' TERM; '
        f'sleep 1; echo 1980 > {lock}; echo "watchdog: relocked 1755 -> 1980 MHz" >> {log}; "$@" & wait $!'
    )
    roles = {}
    for name in ("A", "B"):
        role = sim_role("--ms-per-round", "10", model="exp-gpu-gaps-cap-1980", env={"FAKE_GPU_CAP": "1980"})
        roles[name] = {**role, "argv": ["bash", "-c", relock, "watchdog", *role["argv"]]}
    plan = production_plan(make_plan, "gpu-gaps", window={"production_clock_cap_mhz": 1980}, **roles)
    from_log = "cap_from = 'log'\ncap_log_pattern = 'serving exp-gpu-gaps-cap-(\\d+) on'\n" if cap_from == "log" else ""
    plan.write_text(
        plan.read_text() + f'\n[telemetry]\ninterval_s = 0.2\nwatchdog_logs = {{ here = "{log}" }}\n'
        "watchdog_pattern = 'relocked'\n" + from_log
    )
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 0, done.stderr
    window = only_window(plan)
    s1, s2 = (json.loads((window / "starts" / s / "start.json").read_text())["telemetry"] for s in ("s1", "s2"))
    assert s1["cap_mhz"] == s2["cap_mhz"] == 1980.0 and s2["cap_changes"] == []  # no start saw a change
    proofs = [e for e in read_jsonl(window / "journal.jsonl") if e["step"] in ("quiet", "quiet after")]
    proved = [(e["gpus_read"], e["gpus_unread"]) for e in proofs if e["event"] == "end"]
    assert proved == [({"here": ["GPU-fake-0", "GPU-fake-1"]}, [])] * 2  # each quiet proof says what it read
    decision = json.loads((window / "decision.json").read_text())
    assert decision["verdict"] == "INCONCLUSIVE" and decision["unobserved"] == []
    assert decision["cells"][0]["validity"] is not None, decision["cells"][0]["reasons"]
    conditions = decision["cells"][0]["validity"]["conditions"]
    for gap in ("before s2", "before s3"):
        assert (
            f"the clock cap changed between starts, {gap}: GPU-fake-0 1980 -> 1755 -> 1980 MHz; "
            "GPU-fake-1 1980 -> 1755 -> 1980 MHz" in conditions
        ), conditions
    context = json.loads((window / "context.json").read_text())
    assert set(context["between_starts_relocks"]) >= {"before s2", "before s3"}  # after s3 too when sampled
    lines = context["watchdog_events"]["here"]
    assert lines[:2] == ["watchdog: relocked 1755 -> 1980 MHz", "watchdog: relocked 1980 -> 1755 MHz"]
    assert "watchdog: all well" not in lines and "watchdog: started" not in lines
    logged = "the clock watchdog on here logged during the window: watchdog: relocked"
    assert any(c.startswith(logged) for c in conditions), conditions


@pytest.mark.slow
def test_unobserved_clocks_refuse_a_gpu_plan_unless_it_accepts_them_and_a_cpu_plan_names_them(
    make_plan: PlanFactory, stop_production: list[Path]
) -> None:
    from tests.integration.production import production_plan

    # B makes 4 tokens a round where A makes 1; rounds of 20 ms, servers at nice 10: WIN on any machine, so that
    # what the accepted clocks change (nothing but a line) is all the verdict can show.
    a = sim_role("--ms-per-round", "20", model="exp-clocks-unseen", nice=10)
    b = sim_role(
        "--ms-per-round", "20", "--spec-tokens", "3", "--acceptance", "1,1,1", model="exp-clocks-unseen", nice=10
    )
    # Four streams a wave: a client starved of a CPU during one stream (63 ms of a 304-ms stream once, beside six
    # workers) leaves the repeat's client metrics observed.
    window = {"production_clock_cap_mhz": 1980}
    gpu_plan = production_plan(make_plan, "clocks-unseen", window=window, streams_per_wave=4, A=a, B=b)
    gpu_plan.write_text(gpu_plan.read_text() + '\n[telemetry]\ngpu = "none"\n')
    stop_production.append(gpu_plan)
    assert fairwin("production", "up", str(gpu_plan)).returncode == 0
    refused = fairwin("run", str(gpu_plan), "--mode", "controlled", "--quiet")
    assert refused.returncode == 4 and refused.stderr.count("\n") == 1, refused.stderr
    assert (
        "the clocks cannot be observed (here: its clock cap and its dial-backs (no watchdog log) unseen; "
        "telemetry.gpu = 'none'), and the plan declares production's clock cap" in refused.stderr
    )
    assert [p.name for p in (gpu_plan.parent / "windows").iterdir()] == [".production"]  # no window opened
    assert fairwin("production", "status", str(gpu_plan)).stdout.startswith("UP:")  # refused before the take-down

    gpu_plan.write_text(gpu_plan.read_text() + '\n[runtime]\naccept_unobserved = ["clocks"]\n')
    refused = fairwin("run", str(gpu_plan), "--mode", "controlled", "--quiet")  # its GPUs: nothing reads them
    assert refused.returncode == 4 and "the quiet proof cannot read the GPUs of host here" in refused.stderr
    gpu_plan.write_text(
        gpu_plan.read_text().replace('accept_unobserved = ["clocks"]', 'accept_unobserved = ["clocks", "gpus"]')
    )
    done = fairwin("run", str(gpu_plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 0, done.stderr
    decision = json.loads((only_window(gpu_plan) / "decision.json").read_text())
    assert decision["unobserved"] == [
        "clocks (here: its clock cap and its dial-backs (no watchdog log) unseen; telemetry.gpu = 'none'): "
        "accepted by runtime.accept_unobserved",
        "GPUs (here): the quiet proof read none there; accepted by runtime.accept_unobserved",
    ]
    # Accepted: the clocks make no cell INCONCLUSIVE, and are only named.
    assert decision["verdict"] == "WIN", decision["reasons"]
    said = [*decision["reasons"][:-1]]
    for cell in decision["cells"]:
        said += [*cell["reasons"], *((cell["validity"] or {}).get("conditions") or [])]
    assert not [line for line in said if "clock" in line], said
    assert decision["reasons"][-1].startswith("unobserved: clocks (here:")

    cpu_plan = make_plan(window={"repeats": 2, "warmup_waves_max": 1}, name="cpu.toml")
    cpu_plan.write_text(cpu_plan.read_text() + '\n[telemetry]\ngpu = "none"\n')
    done = fairwin("run", str(cpu_plan), "--mode", "controlled", "--quiet", "--out", str(cpu_plan.parent / "cpu"))
    assert done.returncode == 0, done.stderr
    window = next(p for p in (cpu_plan.parent / "cpu").iterdir() if p.is_dir())
    decision = json.loads((window / "decision.json").read_text())
    assert decision["unobserved"] == [
        "clocks (here: its clock cap and its dial-backs (no watchdog log) unseen; telemetry.gpu = 'none'): "
        "a plan that declares no production clock cap"
    ]
