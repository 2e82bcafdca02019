"""Slurm holds the hardware: a window of a plan with [cluster] runs only in an exclusive allocation of its nodes,
against a real Slurm on this machine (tests/integration/slurm.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import fairwin, only_window, processes_with, status
from tests.integration.production import production_plan
from tests.integration.slurm import (
    Cluster,
    fairwin_on,
    in_job,
    slow_plan,
    slurm_production,
    wait_for_begin,
)
from tests.integration.sshd import SshHosts
from tests.integration.test_workers import spanning_plan, worker
from tests.ports import free_port


def cluster_plan(make_plan: PlanFactory, model: str, nodes: list[str], asked: str = "") -> Path:
    """Two sim roles in a cluster plan: its nodes by name, or (``asked``, with no nodes) its count and constraint."""
    plan = make_plan(
        roles={"A": sim_role("--ms-per-round", "2", model=model), "B": sim_role("--ms-per-round", "2", model=model)},
        window={"repeats": 2},
    )
    wanted = f"nodes = {json.dumps(nodes)}\n" if nodes else asked
    plan.write_text(plan.read_text() + f'\n[cluster]\nscheduler = "slurm"\n{wanted}')
    return plan


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


def test_a_worker_here_of_a_role_across_hosts_runs_as_a_step_of_the_window_s_job(
    make_plan: PlanFactory, slurm_cluster: Cluster, ssh_hosts: SshHosts
) -> None:
    here = worker("span-step-worker", free_port())
    del here["host"]  # role B's worker here, its head on host h2 over SSH
    plan = spanning_plan(make_plan, ssh_hosts, "span-step", here)
    plan.write_text(plan.read_text() + '\n[cluster]\nscheduler = "slurm"\nnodes = ["n2"]\n')
    done = in_job(slurm_cluster, plan, "-p", "bench", "--exclusive", "-w", "n2")
    assert done.returncode == 0, done.stdout
    window = only_window(plan)
    job = json.loads((window / "window.json").read_text())["cluster"]["job_id"]
    starts = [json.loads(path.read_text()) for path in sorted(window.glob("starts/s*/start.json"))]
    spanning = [start for start in starts if start["role"] == "B"]
    workers = [w for start in spanning for w in start["workers"]]
    assert spanning and len(workers) == len(spanning), starts
    assert all(
        w["slurm_step"].startswith(f"step {job}.") and " on node n2, task pid " in w["slurm_step"] for w in workers
    )
    assert all("slurm_step" not in start for start in spanning)  # its head on h2 runs over SSH, not as a step
    assert processes_with("span-step-worker") == [] and processes_with("span-step-b") == []


def test_a_window_asking_for_a_count_of_nodes_with_a_feature_runs_on_the_node_slurm_picks(
    make_plan: PlanFactory, slurm_cluster: Cluster
) -> None:
    plan = cluster_plan(make_plan, "counted", [], 'count = 1\nconstraint = "fast"\n')  # only n2 is fast
    done = fairwin_on(slurm_cluster, "submit", str(plan))
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.startswith("submitted Slurm job ") and ": nodes 1 node(s) with fast alone, " in done.stdout
    window = only_window(plan)
    assert json.loads((window / "window.json").read_text())["cluster"]["nodes"] == ["n2"]
    assert status(window)["state"] == "complete" and processes_with("counted") == []


def test_a_counted_window_in_a_job_not_asked_for_its_constraint_is_refused(
    make_plan: PlanFactory, slurm_cluster: Cluster
) -> None:
    plan = cluster_plan(make_plan, "counted-wrong", [], 'count = 1\nconstraint = "fast"\n')
    refused = in_job(slurm_cluster, plan, "-p", "bench", "--exclusive", "-w", "n1")
    assert refused.returncode == 4, refused.stdout
    assert "was not asked for nodes with fast (its constraint: (null)): submit it with -C 'fast'" in refused.stdout
    assert not (plan.parent / "windows").exists() or not any((plan.parent / "windows").glob("*/status.json"))


def test_a_role_on_a_host_bound_to_the_jobs_second_node_runs_as_a_step_there(
    make_plan: PlanFactory, slurm_cluster: Cluster
) -> None:
    there = sim_role(
        "--ms-per-round",
        "2",
        model="two-nodes-b",
        host="right",
        port=free_port(),
        base_url="http://{head_address}:{port}",
    )
    plan = make_plan(
        roles={"A": sim_role("--ms-per-round", "2", model="two-nodes-a"), "B": there}, window={"repeats": 2}
    )
    plan.write_text(
        plan.read_text() + '\n[cluster]\nscheduler = "slurm"\nnodes = ["n1", "n2"]\nhosts = ["left", "right"]\n'
    )
    done = fairwin_on(slurm_cluster, "submit", str(plan))
    assert done.returncode == 0, (done.stdout, done.stderr)
    window = only_window(plan)
    cluster = json.loads((window / "window.json").read_text())["cluster"]
    assert (cluster["nodes"], cluster["hosts"]) == (["n1", "n2"], {"left": "n1", "right": "n2"})
    starts = [json.loads(path.read_text()) for path in sorted(window.glob("starts/s*/start.json"))]
    where = {(start["role"], start["slurm_step"].split(" on node ")[1].split(",")[0]) for start in starts}
    assert where == {("A", "n1"), ("B", "n2")}, starts
    assert all(start["slurm_step"].startswith(f"step {cluster['job_id']}.") for start in starts)
    assert status(window)["state"] == "complete"
    assert processes_with("two-nodes-a") == [] and processes_with("two-nodes-b") == []
