"""Slurm holds the hardware: a window of a plan with [cluster] runs only in an exclusive allocation of its nodes,
against a real Slurm on this machine (tests/integration/slurm.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fairwin.files import scan_jsonl
from tests.conftest import PlanFactory, plan_factory, sim_role
from tests.integration.helpers import fairwin, only_window, processes_with, status, wait_healthy
from tests.integration.production import WATCH, production_plan
from tests.integration.slurm import Cluster
from tests.ports import free_port


def cluster_plan(make_plan: PlanFactory, model: str, nodes: list[str]) -> Path:
    plan = make_plan(
        roles={"A": sim_role("--ms-per-round", "2", model=model), "B": sim_role("--ms-per-round", "2", model=model)},
        window={"repeats": 2},
    )
    plan.write_text(plan.read_text() + f'\n[cluster]\nscheduler = "slurm"\nnodes = {json.dumps(nodes)}\n')
    return plan


def in_job(cluster: Cluster, plan: Path, *sbatch: str, run: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """``fairwin run PLAN`` as a Slurm batch job, followed to its end (every 0.2 s: sbatch --wait polls far less
    often); its output and exit code are the job's."""
    out = plan.parent / "job.out"
    command = f"exec {sys.executable} -m fairwin run {plan} --quiet {' '.join(run)}"
    submitted = cluster.run("sbatch", "--parsable", "-o", str(out), *sbatch, "--wrap", command)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    cluster.wait_ended(job)
    code = cluster.exit_code(job)
    return subprocess.CompletedProcess(["sbatch", job], code, out.read_text() if out.exists() else "", "")


def test_a_cluster_window_outside_a_slurm_job_is_refused(
    make_plan: PlanFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)  # outside a job, wherever the suite runs
    plan = cluster_plan(make_plan, "outside-job", ["n1"])
    refused = fairwin("run", str(plan))
    assert refused.returncode == 4
    assert "runs outside a Slurm job: run it in an exclusive allocation of its nodes (sbatch --exclusive -w n1" in (
        refused.stderr
    )
    assert "(refused by the cluster allocation check)" in refused.stderr


def test_a_window_in_an_exclusive_allocation_of_its_nodes_runs_and_records_its_job(
    make_plan: PlanFactory, slurm_cluster: Cluster
) -> None:
    plan = cluster_plan(make_plan, "in-job", ["n1"])
    done = in_job(slurm_cluster, plan, "-p", "bench", "--exclusive", "-w", "n1")
    assert done.returncode == 0, (done.stdout, done.stderr)
    (window,) = [p for p in (plan.parent / "windows").iterdir() if p.is_dir() and not p.name.startswith(".")]
    manifest = json.loads((window / "window.json").read_text())
    assert manifest["cluster"]["nodes"] == ["n1"] and manifest["cluster"]["exclusive"] is True
    assert manifest["cluster"]["partition"] == "bench" and manifest["cluster"]["job_id"].isdigit()
    assert json.loads((window / "status.json").read_text())["state"] == "complete"
    job = manifest["cluster"]["job_id"]
    steps = [json.loads(path.read_text())["slurm_step"] for path in sorted(window.glob("starts/s*/start.json"))]
    assert steps and all(step.startswith(f"step {job}.") and " on node n1, task pid " in step for step in steps)
    assert processes_with("in-job") == []


def test_a_node_another_job_holds_is_refused_naming_that_job(make_plan: PlanFactory, slurm_cluster: Cluster) -> None:
    held = slurm_cluster.run(
        "sbatch", "--parsable", "-p", "production", "-w", "n2", "-J", "prod", "-o", "/dev/null", "--wrap", "sleep 300"
    )
    assert held.returncode == 0, held.stderr
    try:
        plan = cluster_plan(make_plan, "held-node", ["n1", "n2"])
        refused = in_job(slurm_cluster, plan, "-p", "bench", "--exclusive", "-w", "n1")
        assert refused.returncode == 4, (refused.stdout, refused.stderr)
        job = held.stdout.strip()
        assert "node n2 is not in Slurm job " in refused.stdout
        assert f"'s allocation (n1): held by job {job} (production, root, RUNNING, prod)" in refused.stdout
        assert not (plan.parent / "windows").exists() or not any((plan.parent / "windows").glob("*/window.json"))
    finally:
        slurm_cluster.run("scancel", held.stdout.strip())


def test_a_job_that_shares_its_nodes_is_refused(make_plan: PlanFactory, slurm_cluster: Cluster) -> None:
    plan = cluster_plan(make_plan, "shared-job", ["n1"])
    refused = in_job(slurm_cluster, plan, "-p", "production", "-w", "n1")
    assert refused.returncode == 4, (refused.stdout, refused.stderr)
    assert "shares its nodes (it was not submitted with --exclusive)" in refused.stdout


def fairwin_on(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """A fairwin command pointed at the test cluster (its SLURM_CONF), outside any job."""
    return subprocess.run(
        [sys.executable, "-m", "fairwin", *args], env=cluster.env, capture_output=True, text=True, timeout=300
    )


def test_submit_runs_the_window_as_an_exclusive_job_on_its_nodes_and_follows_it(
    make_plan: PlanFactory, slurm_cluster: Cluster
) -> None:
    plan = cluster_plan(make_plan, "submitted", ["n2"])
    done = fairwin_on(slurm_cluster, "submit", str(plan))
    assert done.returncode == 0, (done.stdout, done.stderr)
    first = done.stdout.splitlines()[0]
    assert first.startswith("submitted Slurm job ") and "nodes n2 alone, limit " in first
    job = first.split()[3].rstrip(":")
    assert f"job {job}: RUNNING" in done.stdout and f"job {job}: COMPLETED" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("verdict: ")
    (window,) = [p for p in (plan.parent / "windows").iterdir() if p.is_dir() and not p.name.startswith(".")]
    manifest = json.loads((window / "window.json").read_text())
    assert (manifest["cluster"]["job_id"], manifest["cluster"]["nodes"]) == (job, ["n2"])
    assert json.loads((window / "status.json").read_text())["state"] == "complete"
    assert (plan.parent / "windows" / f"slurm-{job}.out").is_file()


def test_submit_without_following_returns_the_job_id_at_once(make_plan: PlanFactory, slurm_cluster: Cluster) -> None:
    plan = cluster_plan(make_plan, "not-followed", ["n1"])
    done = fairwin_on(slurm_cluster, "submit", str(plan), "--no-follow")
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    job = line.split()[3].rstrip(":")
    slurm_cluster.wait_ended(job)
    assert slurm_cluster.exit_code(job) == 0
    window = next(p for p in (plan.parent / "windows").iterdir() if p.is_dir() and not p.name.startswith("."))
    assert json.loads((window / "window.json").read_text())["cluster"]["job_id"] == job


def test_submit_needs_a_cluster_section(make_plan: PlanFactory) -> None:
    plan = make_plan()
    refused = fairwin("submit", str(plan))
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith("no [cluster] section; `fairwin submit` runs a window as a Slurm job on one")


def wait_for_begin(plan: Path, step: str, timeout: float = 90) -> Path:
    """The window whose journal shows ``step`` begun."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for journal in (plan.parent / "windows").glob("*/journal.jsonl"):
            if any(e.get("step") == step and e.get("event") == "begin" for e in scan_jsonl(journal)[0]):
                return journal.parent
        time.sleep(0.1)
    raise AssertionError(f"no window reached {step}")


def test_scancel_mid_start_closes_the_window_and_gives_production_back(
    make_plan: PlanFactory, slurm_cluster: Cluster, stop_production: list[Path]
) -> None:
    slow = ("--ms-per-round", "200")  # a start of several seconds: the cancel lands inside it
    plan = production_plan(
        make_plan,
        "prod-cancel",
        A=sim_role(*slow, model="exp-prod-cancel"),
        B=sim_role(*slow, model="exp-prod-cancel"),
    )
    plan.write_text(plan.read_text() + '\n[cluster]\nscheduler = "slurm"\nnodes = ["n1"]\n')
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    submitted = fairwin_on(slurm_cluster, "submit", str(plan), "--no-follow")
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.split()[3].rstrip(":")
    window = wait_for_begin(plan, "start s1")
    assert slurm_cluster.run("scancel", job).returncode == 0
    slurm_cluster.wait_ended(job)
    assert status(window)["state"] == "interrupted"
    pooled = (window / "pooled.jsonl").read_text().splitlines() if (window / "pooled.jsonl").exists() else []
    assert pooled == []  # nothing of the cut start
    assert processes_with("exp-prod-cancel") == []  # nothing of the window left on the node
    assert len(processes_with("--model prod-cancel ")) == 1  # production given back, and running
    assert status(window)["restore"]["state"] == "RESTORED"


@contextlib.contextmanager
def slurm_production(
    cluster: Cluster, name: str, node: str, partition: str = "production"
) -> Iterator[tuple[str, int]]:
    """A sim production run as a requeue-able Slurm job on ``node``, answering health: its job id and port; cancelled
    at the end, whatever happened."""
    port = free_port()
    command = f"exec {sys.executable} -m fairwin sim --port {port} --model {name}"
    submitted = cluster.run(
        "sbatch", "--parsable", "--requeue", "-p", partition, "-w", node, "-J", name, "-o", "/dev/null",
        "--wrap", command,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    try:
        cluster.wait_running(job)
        wait_healthy(f"http://127.0.0.1:{port}/health")
        yield job, port
    finally:
        cluster.run("scancel", job)


def scheduled_plan(
    make_plan: PlanFactory, name: str, port: int, node: str, *flags: str, repeats: int = 2, **production: Any
) -> Path:
    """A plan of two sim roles (``flags`` each) whose production is the Slurm job ``name``, on ``node``."""
    flags = flags or ("--ms-per-round", "2")
    plan = make_plan(
        roles={"A": sim_role(*flags, model=f"exp-{name}"), "B": sim_role(*flags, model=f"exp-{name}")},
        window={"repeats": repeats, "warmup_waves_max": 1},
        cells={"c": {"families": ["prose"], "prompt_tokens": 64, "max_tokens": 16, "streams_per_wave": 1}},
        production={"slurm_job": name, "base_url": f"http://127.0.0.1:{port}", "model": name, **WATCH, **production},
    )
    plan.write_text(plan.read_text() + f'\n[cluster]\nscheduler = "slurm"\nnodes = ["{node}"]\n')
    return plan


def test_a_submitted_window_takes_slurm_production_down_by_preemption_and_proves_slurm_gave_it_back(
    make_plan: PlanFactory, slurm_cluster: Cluster
) -> None:
    with slurm_production(slurm_cluster, "prod-preempted", "n1") as (production, port):
        plan = scheduled_plan(make_plan, "prod-preempted", port, "n1")
        done = fairwin_on(slurm_cluster, "submit", str(plan))
        assert done.returncode == 0, (done.stdout, done.stderr)
        job = done.stdout.split()[3].rstrip(":")
        window = only_window(plan)
        down = next(
            e for e in scan_jsonl(window / "journal.jsonl")[0] if e["step"] == "production down" and e["event"] == "end"
        )
        assert down["how"].startswith(f"taken down by Slurm: Slurm job {production} (prod-preempted) PENDING")
        restore = status(window)["restore"]
        assert (restore["state"], restore["slurm"]["window_job"]) == ("RESTORED", job)
        assert restore["up"]["how"].startswith(
            f"run again by Slurm: Slurm job {production} (prod-preempted) RUNNING on n1"
        )
        assert restore["watch"]["ok"] is True and restore["slurm"]["answered_after_s"] is not None
        assert "production RESTORED, answering " in done.stdout
        assert slurm_cluster.run("squeue", "-h", "-j", production, "-o", "%T").stdout.strip() == "RUNNING"
        shown = fairwin_on(slurm_cluster, "status", str(window))
        assert shown.stdout.splitlines() == [
            f"window {window.name}: complete, {status(window)['verdict']}",
            f"production: RESTORED, answering {restore['slurm']['answered_after_s']:g} s after window job {job} ended",
            f"Slurm job {job}: COMPLETED on n1, exit code 0:0",
        ]


def test_where_the_cluster_does_not_preempt_submit_requeues_slurm_production_and_proves_it_back(
    make_plan: PlanFactory, slurm_cluster: Cluster
) -> None:
    with slurm_production(slurm_cluster, "prod-requeued", "n2", partition="service") as (production, port):
        plan = scheduled_plan(make_plan, "prod-requeued", port, "n2", slurm_take_down="requeue")
        done = fairwin_on(slurm_cluster, "submit", str(plan))
        assert done.returncode == 0, (done.stdout, done.stderr)
        job = done.stdout.split()[3].rstrip(":")
        assert f"for job {job}: Slurm job {production} (prod-requeued) RUNNING on n2 (None), restarted 0 time(s): " in (
            done.stdout
        )
        restore = status(only_window(plan))["restore"]
        assert (restore["state"], restore["slurm"]["window_job"]) == ("RESTORED", job)
        assert slurm_cluster.run("squeue", "-h", "-j", production, "-o", "%T %P").stdout.strip() == "RUNNING service"


def slow_plan(make_plan: PlanFactory, name: str, port: int, node: str) -> Path:
    """A Slurm production's plan whose starts take about 12 s each, over a minute in all: a fault lands inside."""
    return scheduled_plan(make_plan, name, port, node, "--ms-per-round", "200", repeats=4)


def test_a_job_cut_short_by_its_time_limit_closes_its_window_before_it_and_slurm_gives_production_back(
    make_plan: PlanFactory, slurm_cluster: Cluster
) -> None:
    with slurm_production(slurm_cluster, "prod-limit", "n2") as (production, port):
        plan = slow_plan(make_plan, "prod-limit", port, "n2")
        submitted = subprocess.Popen(
            [sys.executable, "-m", "fairwin", "submit", str(plan)], env=slurm_cluster.env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        window = wait_for_begin(plan, "start s1")
        job = json.loads((window / "window.json").read_text())["cluster"]["job_id"]
        # Less than the signal's lead left: Slurm tells the window to close at its next check of time limits (every
        # 30 s), well before the limit and the window's end.
        assert slurm_cluster.run("scontrol", "update", f"JobId={job}", "TimeLimit=1").returncode == 0
        out, err = submitted.communicate(timeout=120)
        assert submitted.returncode == 130, (out, err)
        assert slurm_cluster.run("scontrol", "show", "job", "-o", job).stdout.count("JobState=TIMEOUT") == 0
        assert status(window)["state"] == "interrupted"
        restore = status(window)["restore"]
        assert (restore["state"], restore["slurm"]["window_job"]) == ("RESTORED", job)
        assert processes_with("exp-prod-limit") == []
        assert slurm_cluster.run("squeue", "-h", "-j", production, "-o", "%T").stdout.strip() == "RUNNING"


def test_recover_gives_slurm_production_back_after_the_window_s_batch_step_is_killed(
    make_plan: PlanFactory, slurm_cluster: Cluster
) -> None:
    with slurm_production(slurm_cluster, "prod-killed", "n1") as (production, port):
        plan = slow_plan(make_plan, "prod-killed", port, "n1")
        submitted = fairwin_on(slurm_cluster, "submit", str(plan), "--no-follow")
        assert submitted.returncode == 0, submitted.stderr
        job = submitted.stdout.split()[3].rstrip(":")
        window = wait_for_begin(plan, "start s1")
        os.kill(status(window)["coordinator"]["pid"], signal.SIGKILL)  # the batch step: fairwin itself
        slurm_cluster.wait_ended(job)
        assert status(window)["state"] == "running"  # it never closed
        recovered = fairwin_on(slurm_cluster, "recover", str(plan))
        assert recovered.returncode == 0, (recovered.stdout, recovered.stderr)
        assert status(window)["state"] == "interrupted"
        assert status(window)["recovery"]["restore"]["state"] == "RESTORED"
        assert processes_with("exp-prod-killed") == []
        assert slurm_cluster.run("squeue", "-h", "-j", production, "-o", "%T").stdout.strip() == "RUNNING"


def test_two_plans_submitted_at_once_run_in_parallel_on_two_nodes_and_both_archive_to_postgresql(
    tmp_path: Path, slurm_cluster: Cluster, postgres_url: str
) -> None:
    env = {**slurm_cluster.env, "FAIRWIN_ARCHIVE_URL": postgres_url}  # sbatch passes it on to each job
    assert subprocess.run([sys.executable, "-m", "fairwin", "archive", "migrate"], env=env).returncode == 0
    plans = []
    with contextlib.ExitStack() as productions:
        for name, node in (("prod-one", "n1"), ("prod-two", "n2")):
            _, port = productions.enter_context(slurm_production(slurm_cluster, name, node))
            (tmp_path / name).mkdir()
            plans.append(scheduled_plan(plan_factory(tmp_path / name), name, port, node))
        submitted = [
            subprocess.Popen(
                [sys.executable, "-m", "fairwin", "submit", str(plan)], env=env, stdout=subprocess.PIPE, text=True
            )
            for plan in plans
        ]
        outs = [process.communicate(timeout=240)[0] for process in submitted]
        assert [process.returncode for process in submitted] == [0, 0], outs
        jobs = [out.split()[3].rstrip(":") for out in outs]
        spans = [slurm_cluster.job_span(job) for job in jobs]
        assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1], spans  # each began before the other ended
        windows = [only_window(plan) for plan in plans]
        exported = tmp_path / "archive.jsonl"
        done = subprocess.run(
            [sys.executable, "-m", "fairwin", "archive", "export", "--to", str(exported), "--archive", postgres_url]
        )
        assert done.returncode == 0
        rows = [json.loads(line) for line in exported.read_text().splitlines()]
        archived = sorted(row["window_id"] for row in rows)
        assert archived == sorted([windows[0].name] * 2 + [windows[1].name] * 2)  # each window's two control starts
        assert [status(window)["restore"]["state"] for window in windows] == ["RESTORED", "RESTORED"]


def test_a_chain_with_production_as_a_slurm_job_is_refused(make_plan: PlanFactory, slurm_cluster: Cluster) -> None:
    plan = scheduled_plan(make_plan, "prod-chained", free_port(), "n1")
    refused = in_job(slurm_cluster, plan, "-p", "bench", "--exclusive", "-w", "n1", run=("--chain",))
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    assert (
        "--chain with production as a Slurm job (prod-chained): Slurm would run it again between the chain's jobs"
        in (refused.stdout)
    )


def test_a_node_lost_mid_window_fails_the_start_naming_it_and_production_comes_back_with_the_node(
    make_plan: PlanFactory, slurm_cluster: Cluster
) -> None:
    with slurm_production(slurm_cluster, "prod-lost", "n1") as (production, port):
        plan = scheduled_plan(make_plan, "prod-lost", port, "n1", repeats=4)
        submitted = subprocess.Popen(
            [sys.executable, "-m", "fairwin", "submit", str(plan)], env=slurm_cluster.env, stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            window = wait_for_begin(plan, "start s1")
            slurm_cluster.kill_slurmd("n1")
            deadline = time.monotonic() + 90
            while status(window)["state"] == "running" and time.monotonic() < deadline:
                time.sleep(0.2)
            assert status(window)["state"] == "failed"
            assert "on node n1 (node n1: " in status(window)["error"]
            # While the node is lost, production (bound to it) cannot run: Slurm gives it back with the node.
            assert slurm_cluster.run("squeue", "-h", "-j", production, "-o", "%T").stdout.strip() == "PENDING"
        finally:
            slurm_cluster.start_slurmd("n1")
        out, _ = submitted.communicate(timeout=120)
        assert submitted.returncode == 3, out  # the window's own status: a start that failed
        assert status(window)["restore"]["state"] == "RESTORED"
        assert processes_with("exp-prod-lost") == []
        assert slurm_cluster.run("squeue", "-h", "-j", production, "-o", "%T").stdout.strip() == "RUNNING"
