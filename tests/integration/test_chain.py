"""Chained windows against a real `fairwin sim` production and real placeholder processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from fairwin.errors import ANSWER_IS_NO
from fairwin.files import read_jsonl
from fairwin.plan.site import Site
from tests.components import missing
from tests.conftest import PlanFactory, sim_role, to_toml
from tests.integration.helpers import fairwin, processes_with, status
from tests.integration.production import killed_inside, production_plan, start_run
from tests.integration.sshd import SshHosts
from tests.integration.test_hosts import with_hosts


def chain_plan(make_plan: PlanFactory, model: str, **roles: object) -> Path:
    # A placeholder is any command that holds on; its last argument tells it apart in the process table.
    holder = {"argv": [sys.executable, "-c", "import time; time.sleep(3600)", f"hold-{model}"], "settle_s": 0.2}
    return production_plan(
        make_plan, model, window={"rule": "win2-launch-v1"}, chain={"placeholders": {"gpu": holder}}, **roles
    )


def windows_of(plan: Path) -> list[Path]:
    return sorted(p for p in (plan.parent / "windows").iterdir() if p.is_dir() and not p.name.startswith("."))


def refused_with_the_gates(plan: Path, done: subprocess.CompletedProcess[str], said: str, marker: Path) -> None:
    """Refused in one line, saying ``said``, before any window opened or production was touched."""
    assert done.returncode == 4 and done.stderr.count("\n") == 1, done.stderr
    assert said in done.stderr, done.stderr
    assert not (plan.parent / "windows").exists() or windows_of(plan) == []  # no window opened
    assert fairwin("production", "status", str(plan)).returncode == 0  # production never touched
    assert not marker.exists()


def run(plan: Path, *flags: str):  # type: ignore[no-untyped-def]
    return fairwin("run", str(plan), "--quiet", *flags)


# Over 30 s: three chained windows, a refused plain one between them, and production's restore at the end:
# the chain's whole life, which no shorter test shows.
@pytest.mark.slow
def test_a_chain_leaves_production_down_between_windows_and_its_last_window_restores_it(
    make_plan: PlanFactory, stop_production: list[Path], scratch_chain_marker: Path
) -> None:
    plan = chain_plan(make_plan, "chain-ok")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    first = run(plan, "--chain")
    assert first.returncode == 0, first.stderr
    (w1,) = windows_of(plan)
    assert status(w1)["state"] == "complete" and status(w1)["restore"]["state"] == "CHAINED"
    assert status(w1)["chain"]["end"] == "CHAINED" and status(w1)["chain"]["position"] == 1
    summary = (w1 / "summary.md").read_text()
    assert "production: CHAINED: production left down" in summary and "chain: CHAINED (window 1" in summary
    assert fairwin("production", "status", str(plan)).returncode == ANSWER_IS_NO  # left down
    assert len(processes_with("hold-chain-ok")) == 1  # the placeholder holds the hardware
    marker = json.loads(scratch_chain_marker.read_text())
    assert marker["format"] == "fairwin.chain-marker/1" and [w["window_id"] for w in marker["windows"]] == [w1.name]
    assert marker["production"]["sha256"] == json.loads((w1 / "window.json").read_text())["production"]["sha256"]
    shown = fairwin("chain", "status", str(plan))
    assert shown.stdout.startswith(f"CHAINED: {marker['chain_id']}, 1 window(s)") and "all running" in shown.stdout
    assert fairwin("chain", "check-prev", str(plan)).stdout.startswith(f"OK: {marker['chain_id']} may continue")
    # A plain window may not run while the chain holds production down: refused, the chain intact.
    plain = run(plan)
    assert plain.returncode == 4 and "a chain is in progress" in plain.stderr and scratch_chain_marker.exists()

    second = run(plan, "--chain")
    assert second.returncode == 0, second.stderr
    w2 = windows_of(plan)[1]
    took_over = next(
        e for e in read_jsonl(w2 / "journal.jsonl") if e["step"] == "production down" and e["event"] == "end"
    )
    assert took_over["left_down_by"] == w1.name and took_over["placeholders"][0].startswith("gpu: stopped pid")
    orders = [json.loads((w / "window.json").read_text())["order"] for w in (w1, w2)]
    assert orders[0] != orders[1]  # a randomized order alternates along the chain
    assert len(json.loads(scratch_chain_marker.read_text())["windows"]) == 2

    last = run(plan, "--chain-last")
    assert last.returncode == 0, last.stderr
    w3 = windows_of(plan)[2]
    assert status(w3)["restore"]["state"] == "RESTORED" and status(w3)["chain"]["end"] == "ENDED"
    assert json.loads((w3 / "window.json").read_text())["order"] == orders[0]
    assert "chain: ENDED" in (w3 / "summary.md").read_text()
    assert fairwin("production", "status", str(plan)).returncode == 0
    assert not scratch_chain_marker.exists() and processes_with("hold-chain-ok") == []
    assert processes_with("exp-chain-ok") == []
    assert fairwin("chain", "status", str(plan)).stdout.startswith("no chain in progress")
    # One table over the chain's windows: each window's verdict and effect, and whether they agree.
    compared = fairwin("compare", str(w1), str(w2), str(w3), "--json")
    found = json.loads(compared.stdout)
    assert [w["window_id"] for w in found["windows"]] == [w1.name, w2.name, w3.name]
    assert [w["order"] for w in found["windows"]] == [orders[0], orders[1], orders[0]]
    assert compared.returncode == (0 if found["agree"] else ANSWER_IS_NO)
    table = fairwin("compare", str(w1), str(w2), str(w3))
    assert w3.name in table.stdout and ("the windows agree" in table.stdout) == found["agree"]
    # The chain's first window left production down: a promotion counts it restored, since the chain's last
    # window restored it (the runbook's chained production-policy windows).
    assert status(w1)["chain"]["chain_id"] == marker["chain_id"] == status(w3)["chain"]["chain_id"]
    decision = json.loads((w1 / "decision.json").read_text())
    policy = plan.parent / "policy.toml"
    policy.write_text(
        to_toml(
            {
                "promote": {
                    "rules": [{"id": decision["rule_id"], "sha256": decision["rule_sha256"]}],
                    "mode": decision["mode"],
                    "require_qualification": False,
                    "require_rehearsal": False,
                    "require_greedy": False,
                }
            }
        )
    )
    receipt = plan.parent / "promotion.json"
    fairwin("promote", "check", str(w1), "--policy", str(policy), "--out", str(receipt))  # the old spelling of --to
    checks = {c["check"]: c["ok"] for c in json.loads(receipt.read_text())["checks"]}
    assert checks["production restored"] is True, json.loads(receipt.read_text())["reasons"]


def test_a_placeholder_that_is_no_command_is_refused_with_the_gates(
    make_plan: PlanFactory, stop_production: list[Path], scratch_chain_marker: Path
) -> None:
    plan = chain_plan(make_plan, "chain-nocmd")
    plan.write_text(
        plan.read_text().replace(
            f'"{sys.executable}", "-c", "import time; time.sleep(3600)"', '"no-such-placeholder-command"', 1
        )
    )
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    said = "placeholder gpu: no-such-placeholder-command is not a command fairwin can run here"
    refused_with_the_gates(plan, run(plan, "--chain"), said, scratch_chain_marker)


def test_a_placeholder_whose_port_is_held_is_refused_with_the_gates_naming_the_holder(
    make_plan: PlanFactory, stop_production: list[Path], scratch_chain_marker: Path
) -> None:
    import socket

    plan = chain_plan(make_plan, "chain-port")
    with socket.create_server(("127.0.0.1", 0)) as squatter:  # this test's own process holds the port
        port = squatter.getsockname()[1]
        plan.write_text(plan.read_text().replace('"settle_s" = 0.2', f'"settle_s" = 0.2, "port" = {port}', 1))
        assert f'"port" = {port}' in plan.read_text()
        stop_production.append(plan)
        assert fairwin("production", "up", str(plan)).returncode == 0
        done = run(plan, "--chain")
    said = f"placeholder gpu: its port {port} here is already held by pid {os.getpid()}"
    refused_with_the_gates(plan, done, said, scratch_chain_marker)


@pytest.mark.slow
def test_a_failure_inside_a_chained_window_aborts_the_chain(
    make_plan: PlanFactory, stop_production: list[Path], scratch_chain_marker: Path
) -> None:
    plan = chain_plan(make_plan, "chain-abort")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    assert run(plan, "--chain").returncode == 0
    # The next window's candidate fails at its start: the chain is aborted, not left down.
    text = plan.read_text()
    role_b = text.index("[roles.B]") if "[roles.B]" in text else text.index('[roles."B"]')
    plan.write_text(text[:role_b] + text[role_b:].replace('"2"]', '"2", "--fault", "exit-at-start"]', 1))
    failed = run(plan, "--chain", "--mode", "controlled")
    assert failed.returncode == 3, failed.stderr
    assert "chain ABORTED, decision REJECT; production: RESTORED" in failed.stderr and failed.stderr.count("\n") == 1
    w2 = windows_of(plan)[1]
    chain = status(w2)["chain"]
    assert status(w2)["state"] == "failed" and chain["end"] == "ABORTED" and chain["decision"] == "REJECT"
    assert "exited" in chain["reason"] or "exit" in chain["reason"]
    assert fairwin("production", "status", str(plan)).returncode == 0
    assert not scratch_chain_marker.exists()
    assert processes_with("hold-chain-abort") == [] and processes_with("exp-chain-abort") == []


@pytest.mark.slow
def test_a_chain_abort_while_a_window_holds_the_hardware_is_refused_naming_it_and_touches_nothing(
    make_plan: PlanFactory, stop_production: list[Path], scratch_chain_marker: Path, tmp_path: Path
) -> None:
    """`fairwin chain abort` holds the hardware as a window does: with the next chained window running (its lock
    held), it would give production back under that window's starts; it refuses instead, and aborts once it is
    gone."""
    from fairwin.custody.lock import acquire, lock_path, release
    from fairwin.plan import load_plan

    plan = chain_plan(make_plan, "chain-held")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    assert run(plan, "--chain").returncode == 0
    loaded = load_plan(plan)
    lock = lock_path(Site.of(loaded), loaded.output_dir())
    running = "20261205T120000Z-controlled-next"
    acquire(lock, running, tmp_path / "next-window", "ci")
    try:
        refused = fairwin("chain", "abort", str(plan))
        assert refused.returncode == 4, refused.stderr
        assert f"the hardware is held by window {running}" in refused.stderr
        assert scratch_chain_marker.exists() and processes_with("hold-chain-held") != []  # nothing touched
        assert fairwin("production", "status", str(plan)).returncode == ANSWER_IS_NO  # still down, as chained
    finally:
        release(lock, running)
    aborted = fairwin("chain", "abort", str(plan))
    assert aborted.returncode == 0 and aborted.stdout.startswith("ABORTED "), aborted.stderr
    assert not scratch_chain_marker.exists() and processes_with("hold-chain-held") == []
    assert fairwin("production", "status", str(plan)).returncode == 0


@pytest.mark.slow
def test_check_prev_refuses_a_dead_placeholder_and_aborts_the_chain(
    make_plan: PlanFactory, stop_production: list[Path], scratch_chain_marker: Path
) -> None:
    plan = chain_plan(make_plan, "chain-prev")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    assert run(plan, "--chain").returncode == 0
    (placeholder,) = processes_with("hold-chain-prev")
    os.kill(placeholder, signal.SIGKILL)
    checked = fairwin("chain", "check-prev", str(plan))
    assert checked.returncode == 4, checked.stderr
    assert "gpu (pid" in checked.stderr and "is not running" in checked.stderr
    assert "chain ABORTED, decision REJECT; production RESTORED" in checked.stderr
    assert fairwin("production", "status", str(plan)).returncode == 0 and not scratch_chain_marker.exists()


# Over 30 s: two chained windows around a change of production's declaration, and the refusals before them.
@pytest.mark.slow
def test_a_changed_production_needs_its_capture_and_refusals_touch_nothing(
    make_plan: PlanFactory, stop_production: list[Path], scratch_chain_marker: Path
) -> None:
    plan = chain_plan(make_plan, "chain-cap", N=sim_role(model="exp-chain-cap"))
    stop_production.append(plan)
    never = plan.read_text() + '\n[modes.admission]\ncontrol = "A"\ncandidate = "N"\nchain = false\n'
    plan.write_text(never)
    refused = run(plan, "--chain", "--mode", "admission")
    assert refused.returncode == 2 and "never chains" in refused.stderr and not (plan.parent / "windows").exists()
    assert run(plan, "--chain-last").returncode == 2  # no chain to end
    assert fairwin("production", "up", str(plan)).returncode == 0
    assert run(plan, "--chain").returncode == 0
    # Production's declaration changes between the windows (a new flag): the next window needs its capture.
    plan.write_text(plan.read_text().replace('"--model", "chain-cap"', '"--model", "chain-cap", "--seed", "7"'))
    capture = plan.parent / "production-capture.json"
    assert fairwin("production", "snapshot", str(plan), "--to", str(capture)).returncode == 0
    last = run(plan, "--chain-last", "--chain-production", str(capture))
    assert last.returncode == 0, last.stderr
    assert fairwin("production", "status", str(plan)).returncode == 0 and not scratch_chain_marker.exists()
    assert len(processes_with("--model chain-cap --seed 7")) == 1  # restored as declared now
    # Without the capture, the same change refuses the chained window and aborts the chain.
    assert run(plan, "--chain").returncode == 0
    plan.write_text(plan.read_text().replace('"--seed", "7"', '"--seed", "8"'))
    changed = run(plan, "--chain")
    assert changed.returncode == 4 and "production's declaration changed" in changed.stderr
    assert "chain ABORTED, decision REJECT" in changed.stderr and not scratch_chain_marker.exists()
    assert fairwin("production", "status", str(plan)).returncode == 0


def test_the_marker_path_comes_from_the_environment_before_the_plan(
    make_plan: PlanFactory, scratch_chain_marker: Path, tmp_path: Path
) -> None:
    from fairwin.custody.chain import marker_path
    from fairwin.plan import load_plan

    plan = production_plan(make_plan, "chain-path", chain={"marker": "live-chain.json"})
    assert marker_path(Site.of(load_plan(plan)), tmp_path) == scratch_chain_marker
    os.environ.pop("FAIRWIN_CHAIN_MARKER")
    assert marker_path(Site.of(load_plan(plan)), tmp_path) == plan.parent / "live-chain.json"


@pytest.mark.slow
def test_recover_after_fairwin_died_inside_a_chain_aborts_it(
    make_plan: PlanFactory, stop_production: list[Path], scratch_chain_marker: Path
) -> None:
    plan = chain_plan(make_plan, "chain-kill")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    assert run(plan, "--chain").returncode == 0
    window = killed_inside(plan, start_run(plan, "--chain", kill_at="start s2:launched"), "start s2:launched")
    recovered = fairwin("recover", str(plan))
    assert recovered.returncode == 0, recovered.stderr
    assert "production RESTORED" in recovered.stdout and "ABORTED (decision REJECT)" in recovered.stdout
    assert status(window)["state"] == "interrupted"
    assert not scratch_chain_marker.exists() and fairwin("production", "status", str(plan)).returncode == 0
    assert processes_with("hold-chain-kill") == [] and processes_with("exp-chain-kill") == []


@pytest.mark.slow
def test_a_failure_after_the_chained_close_still_aborts_the_chain_and_restores_production(
    make_plan: PlanFactory, stop_production: list[Path], scratch_chain_marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from fairwin.plan import load_plan
    from fairwin.window import machine
    from fairwin.window.run import run_window

    plan = chain_plan(make_plan, "chain-late")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the decision could not be written")

    monkeypatch.setattr(machine, "decide_and_report", broken)  # fails after `chain hold` wrote the marker
    with pytest.raises(RuntimeError, match="could not be written"):
        asyncio.run(run_window(load_plan(plan), "controlled", chain="chain"))
    (window,) = windows_of(plan)
    events = [(e["step"], e["event"]) for e in read_jsonl(window / "journal.jsonl")]
    assert ("chain hold", "end") in events and ("chain abort", "end") in events and ("restore", "end") in events
    assert status(window)["chain"]["end"] == "ABORTED" and status(window)["restore"]["state"] == "RESTORED"
    assert not scratch_chain_marker.exists() and processes_with("hold-chain-late") == []
    assert fairwin("production", "status", str(plan)).returncode == 0


def placeholders_on_two_hosts(socket: str, tag: str) -> dict[str, dict[str, object]]:
    """`hold1` on h1 and `hold2` on h2, each in tmux on ``socket``, told apart in the process table by ``tag``."""
    return {
        f"hold{n}": {
            "argv": [sys.executable, "-c", "import time; time.sleep(3600)", f"{tag}-h{n}"],
            "host": f"h{n}",
            "tmux_socket": socket,
            "settle_s": 0.3,
        }
        for n in (1, 2)
    }


def tmux_sessions(socket: str) -> list[str]:
    done = subprocess.run(
        ["tmux", "-L", socket, "list-sessions", "-F", "#{session_name}"], capture_output=True, text=True
    )
    return sorted(done.stdout.split()) if done.returncode == 0 else []


@pytest.mark.slow
def test_placeholders_on_two_hosts_hold_the_hardware_between_chained_windows(
    make_plan: PlanFactory, ssh_hosts: SshHosts, stop_production: list[Path], scratch_chain_marker: Path
) -> None:
    """The runbook's hold: a placeholder in tmux on each host, started over SSH, proved there, left running
    between windows, probed there by check-prev, and taken down by the next window."""
    if shutil.which("tmux") is None:
        missing("tmux", "tmux is not on the PATH")
    socket = f"fairwin-test-{os.getpid()}"  # the loopback hosts share this machine: one socket of the test's own
    holders = placeholders_on_two_hosts(socket, "hold-chain-hosts")
    plan = with_hosts(
        production_plan(make_plan, "chain-hosts", window={"rule": "win2-launch-v1"}, chain={"placeholders": holders}),
        ssh_hosts,
    )
    stop_production.append(plan)
    try:
        assert fairwin("production", "up", str(plan)).returncode == 0
        first = run(plan, "--chain")
        assert first.returncode == 0, first.stderr
        assert tmux_sessions(socket) == ["fairwin-hold-hold1", "fairwin-hold-hold2"]  # they outlived the window
        marker = json.loads(scratch_chain_marker.read_text())
        assert [(p["name"], p["host"], p["session"]) for p in marker["placeholders"]] == [
            ("hold1", "h1", "fairwin-hold-hold1"),
            ("hold2", "h2", "fairwin-hold-hold2"),
        ]
        (w1,) = windows_of(plan)
        events = read_jsonl(w1 / "journal.jsonl")
        held = next(e for e in events if e["step"] == "chain hold" and e["event"] == "end")
        assert held["placeholders_started"] == "before the last start's servers stopped"
        last_start_ended = next(e["time"] for e in events if e["step"] == "start s3" and e["event"] == "end")
        s3_stop = json.loads((w1 / "starts" / "s3" / "start.json").read_text())["stop"]["seconds"]
        for record in marker["placeholders"]:  # each held its host before s3's servers were signalled to stop
            assert psutil.Process(record["pid"]).create_time() < last_start_ended - s3_stop
        shown = fairwin("chain", "status", str(plan)).stdout
        assert "on host h2, tmux session fairwin-hold-hold2)" in shown and "all running" in shown
        assert fairwin("chain", "check-prev", str(plan)).returncode == 0

        second = run(plan, "--chain")  # takes both down, measures, starts them again for the next window
        assert second.returncode == 0, second.stderr
        w2 = windows_of(plan)[1]
        took_over = next(
            e for e in read_jsonl(w2 / "journal.jsonl") if e["step"] == "production down" and e["event"] == "end"
        )
        assert [line.split(" (")[0] for line in took_over["placeholders"]] == [
            f"hold1: stopped pid {marker['placeholders'][0]['pid']} on host h1",
            f"hold2: stopped pid {marker['placeholders'][1]['pid']} on host h2",
        ]

        # One dies on h2: check-prev probes it there, refuses and aborts the chain.
        subprocess.run(["tmux", "-L", socket, "kill-session", "-t", "=fairwin-hold-hold2"], check=True)
        refused = fairwin("chain", "check-prev", str(plan))
        assert refused.returncode == 4, refused.stderr
        assert "on host h2 is not running" in refused.stderr and "chain ABORTED" in refused.stderr
        assert tmux_sessions(socket) == [] and not scratch_chain_marker.exists()
        assert fairwin("production", "status", str(plan)).returncode == 0  # restored
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


@pytest.mark.slow
def test_every_end_of_a_chain_is_a_receipt_even_one_refused_before_its_window_opened(
    make_plan: PlanFactory, stop_production: list[Path], scratch_chain_marker: Path
) -> None:
    """A chain's first window holds over (CHAINED); the next is refused in its preflight (a role's command is not
    executable), which aborts the chain before any window opens: the ledger receipts both ends, the abort with
    its decision REJECT, its reason and the proof of production's restore; `chain status` says so."""
    plan = chain_plan(make_plan, "chain-receipt")
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    assert run(plan, "--chain").returncode == 0
    first = windows_of(plan)[0]
    text = plan.read_text()
    role_b = text.index("[roles.B]") if "[roles.B]" in text else text.index('[roles."B"]')
    plan.write_text(text[:role_b] + text[role_b:].replace('"{python}"', '"/nonexistent/python"', 1))
    refused = run(plan, "--chain")
    assert refused.returncode == 4, refused.stderr
    assert "chain ABORTED, decision REJECT; production RESTORED" in refused.stderr
    assert windows_of(plan) == [first]  # no window opened for it
    chained, aborted = read_jsonl(plan.parent / "windows" / "chains.jsonl")
    assert (chained["end"], chained["window_id"], chained["windows"]) == ("CHAINED", first.name, [first.name])
    assert chained["restore"]["state"] == "CHAINED" and chained["placeholders"] == ["gpu"]
    assert chained["verdict"] == status(first)["verdict"] and chained.get("decision") is None
    assert (aborted["chain_id"], aborted["end"], aborted["decision"]) == (chained["chain_id"], "ABORTED", "REJECT")
    assert aborted.get("window_id") is None and aborted["windows"] == [first.name]
    assert (
        aborted["reason"].startswith("refused before its window opened: ")
        and "/nonexistent/python" in (aborted["reason"])
    )
    assert aborted["restore"]["state"] == "RESTORED" and aborted["restore"]["watch"]["ok"] is True
    assert not scratch_chain_marker.exists() and fairwin("production", "status", str(plan)).returncode == 0
    said = fairwin("chain", "status", str(plan)).stdout.splitlines()
    assert said[1].startswith(f"last chain end: {chained['chain_id']} ABORTED, decision REJECT at ")
    assert "; production RESTORED; refused before its window opened: " in said[1]


@pytest.mark.slow
def test_a_chained_window_that_a_look_stops_early_starts_its_placeholders_before_that_starts_servers_stop(
    make_plan: PlanFactory, stop_production: list[Path], scratch_chain_marker: Path
) -> None:
    """Under the default rule a continuing window stops at whichever look settles it (here the first, after 5 of at
    most 9 starts: the candidate's rounds carry 4 drafted tokens). Its placeholders start at the end of that start,
    while its servers still hold the hardware, not at the chained close after them and after the quiet proof."""
    holder = {"argv": [sys.executable, "-c", "import time; time.sleep(3600)", "hold-chain-early"], "settle_s": 0.2}
    plan = production_plan(
        make_plan,
        "chain-early",
        window={"rule": None},
        chain={"placeholders": {"gpu": holder}},
        B=sim_role(
            "--ms-per-round", "2", "--spec-tokens", "4", "--acceptance", "0.9,0.8,0.7,0.6", model="exp-chain-early"
        ),
    )
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    done = run(plan, "--chain")
    assert done.returncode == 0, done.stderr
    (window,) = windows_of(plan)
    events = read_jsonl(window / "journal.jsonl")
    looks = [e for e in events if e["step"].startswith("look after") and e["event"] == "end"]
    assert [(e["step"], e.get("stopped")) for e in looks] == [("look after s5", "decided")]
    held = next(e for e in events if e["step"] == "chain hold" and e["event"] == "end")
    assert held["placeholders_started"] == "before the last start's servers stopped"
    s5 = json.loads((window / "starts" / "s5" / "start.json").read_text())
    s5_ended = next(e["time"] for e in events if e["step"] == "start s5" and e["event"] == "end")
    stop_began = s5_ended - s5["stop"]["seconds"]  # no later than when s5's servers were signalled
    (record,) = json.loads(scratch_chain_marker.read_text())["placeholders"]
    assert psutil.Process(record["pid"]).create_time() < stop_began
    assert not (window / "starts" / "s6").exists()
