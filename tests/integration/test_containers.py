"""Roles as containers on a real engine: rootful podman with runc, and the docker CLI through podman's socket
(tests/integration/containers.py); the sim runs inside each container."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fairwin.files import read_jsonl, scan_jsonl
from tests.conftest import PlanFactory, sim_role
from tests.integration.containers import IMAGE, Engine, sim_mounts
from tests.integration.helpers import fairwin, only_window, status
from tests.integration.production import WATCH, killed_inside, production_plan, start_run
from tests.integration.sshd import SshHosts
from tests.integration.test_hosts import with_hosts
from tests.ports import free_port

pytestmark = pytest.mark.usefixtures("container_engine")


def container_plan(make_plan: PlanFactory, engine: Engine, model: str, runtime: str = "podman") -> Path:
    """A and B in containers; B proposes 3 tokens a round, every one accepted (4 tokens a round where A makes 1), at
    60 ms a round where A takes 20: B decodes a third faster. Streams of 96 tokens (A's 1.9 s, B's 1.4 s) from servers
    at nice 10 (a container takes no `nice`: its command does), so that a busy machine cannot delay the client's
    reads past what its timing check allows (a fifth of a stream): the verdict is the containers'. (B's 12-round
    streams of 0.5 s came out untrusted once in a whole `make test`, the client's loop 191 ms off its CPU.)"""
    box = engine.sim_container(runtime)
    roles = {
        "A": sim_role("--ms-per-round", "20", model=model, container=box),
        "B": sim_role(
            "--ms-per-round", "60", "--spec-tokens", "3", "--acceptance", "1,1,1", model=model, container=box
        ),
    }
    for role in roles.values():
        role["argv"] = ["nice", "-n", "10", *role["argv"]]
    return make_plan(
        roles=roles,
        window={"repeats": 2, "warmup_waves_max": 1},
        cells={"c": {"families": ["prose"], "prompt_tokens": 64, "max_tokens": 96, "streams_per_wave": 1}},
    )


def remote_container_plan(
    make_plan: PlanFactory, engine: Engine, ssh: SshHosts, model: str, b_ms_per_round: int
) -> Path:
    """A's container on h1 and B's on h2 (loopback sshd), one short cell."""
    box = engine.sim_container()
    roles = {
        "A": sim_role("--ms-per-round", "6", model=model, port=free_port(), host="h1", container=box),
        "B": sim_role("--ms-per-round", str(b_ms_per_round), model=model, port=free_port(), host="h2", container=box),
    }
    cells = {"c": {"families": ["prose"], "prompt_tokens": 64, "max_tokens": 48, "streams_per_wave": 1}}
    return with_hosts(make_plan(roles=roles, window={"repeats": 2, "warmup_waves_max": 1}, cells=cells), ssh)


def receipts(window: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(window.glob("starts/s*/start.json"))]


# make test-fast runs the podman case; the docker CLI's (through podman's socket, a service of its own) in make test.
@pytest.mark.parametrize("runtime", ["podman", pytest.param("docker", marks=pytest.mark.slow)])
def test_a_window_whose_roles_are_containers_completes_and_decides(
    make_plan: PlanFactory, container_engine: Engine, runtime: str, request: pytest.FixtureRequest
) -> None:
    engine = request.getfixturevalue("docker_engine") if runtime == "docker" else container_engine
    plan = container_plan(make_plan, engine, f"boxed-{runtime}", runtime)
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 0, done.stderr
    window = only_window(plan)
    assert status(window)["state"] == "complete"
    decision = json.loads((window / "decision.json").read_text())
    # B makes several tokens a round where A makes one, in its own container: WIN.
    assert decision["verdict"] == "WIN", [cell["reasons"] for cell in decision["cells"]]
    starts = receipts(window)
    assert [s["role"] for s in starts] == ["A", "B", "A"]
    for start in starts:
        box = start["container"]
        assert isinstance(box, dict)
        assert box["runtime"] == runtime and box["image"] == IMAGE and len(str(box["image_id"])) == 64
        assert box["name"] == f"fairwin-{window.name}-{start['start']}-{start['role']}-head"
        assert box["labels"] == {
            "fairwin.window": window.name,
            "fairwin.start": start["start"],
            "fairwin.role": start["role"],
            "fairwin.member": "head",
        }
        assert {"source": "/usr", "destination": "/usr", "mode": "ro"} in box["mounts"]  # type: ignore[operator]
        assert start["env_check"] == ["matches the declaration"]
        assert start["stop"]["signal"] == "SIGTERM"  # type: ignore[index]  # --init: the server got it at once
        log = (window / "starts" / str(start["start"]) / "server.log").read_text()
        assert f"serving boxed-{runtime}" in log  # the container's own output, followed into the start's log
    assert engine.names() == []  # every container removed, none left stopped
    events = scan_jsonl(window / "journal.jsonl")[0]
    launched = [e for e in events if e["event"] == "launching"]
    assert [e["container"] for e in launched] == [
        f"fairwin-{window.name}-s{n}-{r}-head" for n, r in ((1, "A"), (2, "B"), (3, "A"))
    ]


def test_a_container_that_exits_before_it_is_healthy_fails_the_start_with_its_last_log_line(
    make_plan: PlanFactory, container_engine: Engine
) -> None:
    plan = container_plan(make_plan, container_engine, "boxed-dies")
    text = plan.read_text().replace('"--spec-tokens", "3"', '"--no-such-flag"', 1)
    plan.write_text(text)
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode != 0
    assert "exited with code 2 before it was healthy" in done.stderr and "unrecognized arguments" in done.stderr
    assert container_engine.names() == []


def test_a_missing_image_is_refused_before_production_is_touched(
    make_plan: PlanFactory, container_engine: Engine
) -> None:
    plan = container_plan(make_plan, container_engine, "boxed-noimage")
    plan.write_text(plan.read_text().replace(IMAGE, "localhost/not-built:here", 1))
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 4 and done.stderr.count("\n") == 1, done.stderr
    assert "role A: podman here has no image 'localhost/not-built:here'" in done.stderr
    assert not (plan.parent / "windows").exists() or not any((plan.parent / "windows").iterdir())


def test_kill_9_mid_start_then_recover_leaves_no_container(make_plan: PlanFactory, container_engine: Engine) -> None:
    plan = container_plan(make_plan, container_engine, "boxed-killed")
    window = killed_inside(
        plan, start_run(plan, "--mode", "controlled", kill_at="start s1:launched"), "start s1:launched"
    )
    assert container_engine.names(f"fairwin.window={window.name}", every=False) != []  # it outlived fairwin
    done = fairwin("recover", str(plan))
    assert done.returncode == 0, done.stderr
    assert f"container fairwin-{window.name}-s1-A-head here" in json.dumps(status(window)["recovery"])
    assert container_engine.names() == []
    assert status(window)["state"] == "interrupted"
    again = fairwin("recover", str(plan))
    assert again.returncode == 0 and "nothing to recover" in again.stdout


def test_the_quiet_proof_fails_while_another_windows_container_runs(
    make_plan: PlanFactory, container_engine: Engine, stop_production: list[Path]
) -> None:
    box = container_engine.sim_container()
    roles = {r: sim_role("--ms-per-round", "2", model="exp-boxed-quiet", container=box) for r in ("A", "B")}
    plan = production_plan(make_plan, "boxed-quiet", **roles)
    stop_production.append(plan)
    stray = "fairwin-another-window-s1-A-head"
    mounts = [f"--volume={m}" for m in sim_mounts()]
    label = "--label=fairwin.window=another-window"
    container_engine.podman("run", "-d", "--name", stray, label, "--init", *mounts, IMAGE, "/bin/sleep", "120")
    try:
        done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    finally:
        container_engine.podman("rm", "-f", stray, check=False)
    assert done.returncode != 0
    assert f"the hardware is not quiet before s1: container {stray} of a fairwin window runs here" in (done.stderr)
    window = only_window(plan)
    assert status(window)["restore"]["state"] == "RESTORED"
    assert not (window / "starts" / "s1" / "start.json").exists()  # nothing was launched beside it


def container_production(
    make_plan: PlanFactory,
    engine: Engine,
    tmp_path: Path,
    model: str,
    port: int,
    name: str = "plan.toml",
    env: dict[str, str] | None = None,
    models: str = "models",
    mounts: tuple[str, ...] = (),
) -> Path:
    """Production as a team runs it: a container brought up and down by podman commands, read through `podman
    inspect`; PP, production's policy on the experiment's runtime, is a container compared with it (with ``env``
    on top of production's, its /models from ``models``, and ``mounts`` more)."""
    box = engine.sim_container()
    for folder in ("models", models, "trace"):
        (tmp_path / folder).mkdir(exist_ok=True)
    prod_mounts = [*sim_mounts(), f"{tmp_path / 'models'}:/models:ro"]
    up = ["podman", "run", "-d", "--name", f"prod-{model}", "--network", "host", "--init", "-e", "SERVING_MODE=prod"]
    up += [f"--volume={m}" for m in prod_mounts]
    up += [IMAGE, sys.executable, "-m", "fairwin", "sim", "--port", str(port), "--model", model]
    pp_mounts = [*sim_mounts(), f"{tmp_path / models}:/models:ro", *mounts]
    pp = sim_role("--ms-per-round", "2", model=f"exp-{model}", container={**box, "mounts": pp_mounts})
    pp.update(
        env={"SERVING_MODE": "prod", **(env or {})},
        compare_live=True,
        allowed_env_differences=["WORKER_IDENTITIES", "GREEDY"],
        allowed_mount_differences=["/trace"],
    )
    return make_plan(
        roles={"PP": pp, "B": sim_role("--ms-per-round", "2", model=f"exp-{model}")},
        modes={"policy": {"control": "PP", "candidate": "B"}},
        window={"repeats": 2, "warmup_waves_max": 1},
        cells={"c": {"families": ["prose"], "prompt_tokens": 64, "max_tokens": 16, "streams_per_wave": 1}},
        production={
            "up": up,
            "down": ["podman", "rm", "-f", f"prod-{model}"],
            "base_url": f"http://127.0.0.1:{port}",
            "model": model,
            "live": {"head": {"container": f"prod-{model}", "runtime": "podman"}},
            **WATCH,
        },
        name=name,
    )


@pytest.mark.slow  # in make test; test-fast keeps the quicker cases of the same feature
def test_a_p_container_is_compared_with_a_container_production_beyond_the_runbooks_three_differences(
    make_plan: PlanFactory, container_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in container_engine.env.items():  # production's own commands and inspect use the engine too
        monkeypatch.setenv(key, value)
    model, port = "boxed-prod", free_port()
    plan = container_production(make_plan, container_engine, tmp_path, model, port)
    up = fairwin("production", "up", str(plan))
    assert up.returncode == 0, up.stderr
    try:
        extra = container_production(make_plan, container_engine, tmp_path, model, port, "env.toml", {"DEBUG": "1"})
        done = fairwin("run", str(extra), "--mode", "policy", "--quiet")
        assert done.returncode == 4 and done.stderr.count("\n") == 1, done.stderr
        said = done.stderr
        assert "before production is taken down: role PP: its environment differs from production's head" in said
        assert "(container prod-boxed-prod (podman)) in DEBUG" in said

        moved = container_production(make_plan, container_engine, tmp_path, model, port, "mount.toml", models="other")
        done = fairwin("run", str(moved), "--mode", "policy", "--quiet")
        assert done.returncode == 4, done.stderr
        ours, theirs = tmp_path / "other", tmp_path / "models"
        assert f"role PP: its mount at /models is {ours} (ro); production's head has {theirs} (ro)" in done.stderr

        # The runbook's three: the worker identities and the greedy switch in its env, the round-trace mount.
        three = container_production(
            make_plan,
            container_engine,
            tmp_path,
            model,
            port,
            "three.toml",
            {"WORKER_IDENTITIES": "0,1", "GREEDY": "1"},
            mounts=(f"{tmp_path / 'trace'}:/trace",),
        )
        done = fairwin("run", str(three), "--mode", "policy", "--quiet")
        assert done.returncode in (0, 1), done.stderr
        window = only_window(three)
        for start in ("s1", "s3"):
            receipt = json.loads((window / "starts" / start / "start.json").read_text())
            assert receipt["role"] == "PP"
            assert "matches production's head beyond its allowed differences" in receipt["env_check"]
            trace = {"source": str(tmp_path / "trace"), "destination": "/trace", "mode": "rw"}
            assert trace in receipt["container"]["mounts"]
        assert status(window)["restore"]["state"] == "RESTORED"
    finally:
        fairwin("production", "down", str(plan))
    assert container_engine.names("fairwin.window") == []


@pytest.mark.slow  # in make test; test-fast keeps the quicker cases of the same feature
def test_containers_on_a_remote_host_run_a_window_and_recover_removes_one_fairwin_left(
    make_plan: PlanFactory, container_engine: Engine, ssh_hosts: SshHosts
) -> None:
    """The roles' containers run on h1 and h2 (loopback sshd), their runtime asked over SSH."""
    plan = remote_container_plan(make_plan, container_engine, ssh_hosts, "boxed-ssh", b_ms_per_round=2)
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 0, done.stderr
    window = only_window(plan)
    assert [(r["host"], r["container"]["name"]) for r in receipts(window)] == [  # type: ignore[index]
        ("h1", f"fairwin-{window.name}-s1-A-head"),
        ("h2", f"fairwin-{window.name}-s2-B-head"),
        ("h1", f"fairwin-{window.name}-s3-A-head"),
    ]
    assert container_engine.names() == []

    killed = killed_inside(
        plan, start_run(plan, "--mode", "controlled", kill_at="start s2:launched"), "start s2:launched"
    )
    assert container_engine.names(f"fairwin.window={killed.name}", every=False) == [f"fairwin-{killed.name}-s2-B-head"]
    recovered = fairwin("recover", str(plan))
    assert recovered.returncode == 0, recovered.stderr
    assert f"container fairwin-{killed.name}-s2-B-head on host h2" in json.dumps(status(killed)["recovery"])
    assert container_engine.names() == []


@pytest.mark.slow  # in make test; test-fast keeps the quicker cases of the same feature
def test_a_production_role_that_is_a_container_is_brought_up_taken_down_and_restored_through_its_runtime(
    make_plan: PlanFactory, container_engine: Engine
) -> None:
    box = container_engine.sim_container()
    port = free_port()
    production = sim_role(model="boxed-p", port=port, container=box, env={"SERVING_MODE": "prod"})
    pp = sim_role("--ms-per-round", "2", model="exp-boxed-p", container=box, base="P")
    pp.update(env={"GREEDY": "1"}, allowed_env_differences=["GREEDY"])
    plan = make_plan(
        roles={"P": production, "PP": pp, "B": sim_role("--ms-per-round", "2", model="exp-boxed-p")},
        modes={"policy": {"control": "PP", "candidate": "B"}},
        window={"repeats": 2, "warmup_waves_max": 1},
        cells={"c": {"families": ["prose"], "prompt_tokens": 64, "max_tokens": 16, "streams_per_wave": 1}},
        production={"role": "P", **WATCH},
    )
    try:
        up = fairwin("production", "up", str(plan))
        assert up.returncode == 0, up.stderr
        assert "launched container fairwin-production-P (pid " in up.stdout + up.stderr
        assert container_engine.names("fairwin.production=P", every=False) == ["fairwin-production-P"]
        done = fairwin("run", str(plan), "--mode", "policy", "--quiet")
        assert done.returncode in (0, 1), done.stderr
        window = only_window(plan)
        manifest = json.loads((window / "window.json").read_text())
        head = manifest["production"]["live"]["members"][0]
        assert head["found_by"] == "container fairwin-production-P (podman)" and head["env"]["SERVING_MODE"] == "prod"
        assert len(head["image_id"]) == 64 and {"source": "/usr", "destination": "/usr", "mode": "ro"} in head["mounts"]
        receipt = json.loads((window / "starts" / "s1" / "start.json").read_text())
        assert "matches production's head beyond its allowed differences" in receipt["env_check"]
        journal = read_jsonl(window / "journal.jsonl")
        down = next(e for e in journal if e["step"] == "production down" and e["event"] == "end")
        assert down["how"] == "stopped container fairwin-production-P here (SIGTERM)"
        assert status(window)["restore"]["state"] == "RESTORED"
        assert container_engine.names("fairwin.production=P", every=False) == ["fairwin-production-P"]
    finally:
        gone = fairwin("production", "down", str(plan))
    assert gone.returncode == 0, gone.stderr
    assert container_engine.names("fairwin.production=P") == [] and container_engine.names() == []


@pytest.mark.slow
def test_a_container_role_on_a_host_survives_a_dropped_ssh_connection_as_a_process_role_does(
    make_plan: PlanFactory, container_engine: Engine, ssh_hosts: SshHosts
) -> None:
    """B's container runs on h2; once it serves, every SSH session to h2 is cut. The container runs on: fairwin
    connects again within h2's reconnect_s, journals it, follows its wait and its log on, and the start measures."""
    from tests.integration.test_hosts import run_cut_mid_start

    plan = remote_container_plan(make_plan, container_engine, ssh_hosts, "boxed-drop", b_ms_per_round=20)
    run, err = run_cut_mid_start(plan, ssh_hosts)
    assert run.returncode in (0, 1), err  # a verdict, whichever: the window measured through the drop
    window = only_window(plan)
    assert status(window)["state"] == "complete"
    reconnected = [e for e in read_jsonl(window / "journal.jsonl") if e["event"] == "reconnected"]
    assert reconnected and {(e["step"], e["host"]) for e in reconnected} == {("start s2", "h2")}, reconnected
    assert {e["container"] for e in reconnected} == {f"fairwin-{window.name}-s2-B-head"}
    s2 = json.loads((window / "starts" / "s2" / "start.json").read_text())
    assert s2["pooled_rows"] > 0 and s2["stop"]["signal"] == "SIGTERM"  # the container fairwin ran, kept
    assert container_engine.names() == []
