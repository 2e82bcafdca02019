"""Production as Slurm runs it, against a real Slurm on this machine (tests/integration/slurm.py): a requeue-able
job taken down by Slurm's preemption (or requeued where nothing preempts it) and proved back after the window's
job; SIGKILL and recover, a node lost mid-window, two windows at once to PostgreSQL (chains: test_cluster_chain.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fairwin.files import scan_jsonl
from tests.conftest import PlanFactory, plan_factory
from tests.integration.helpers import only_window, processes_with, status
from tests.integration.pages import Resources, rendered_text
from tests.integration.slurm import (
    Cluster,
    fairwin_on,
    scheduled_plan,
    slow_plan,
    slurm_production,
    wait_for_begin,
)


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
            f"Slurm job {job} on n1: COMPLETED, exit code 0:0",
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
        page = tmp_path / "campaign.html"
        directories = [str(p.parent / "windows") for p in plans]
        listed = subprocess.run(
            [sys.executable, "-m", "fairwin", "campaign", *directories, "--archive", postgres_url, "--html", str(page)],
            env=slurm_cluster.env,
            capture_output=True,
            text=True,
        )
        assert listed.returncode == 0, listed.stderr
        for window, job in zip(windows, jobs, strict=True):
            assert f"{window.name}  controlled  job {job} " in listed.stdout and ": COMPLETED, exit code 0:0" in (
                listed.stdout
            )
        found = Resources()
        found.feed(page.read_text())
        assert [u for u in found.urls if not u.startswith("data:")] == []  # nothing fetched when it is opened
        text = rendered_text(page)
        assert "Campaign: 2 windows, 2 complete" in text and all(w.name in text for w in windows)
        assert "control starts" in text and all(f"{job}" in text for job in jobs)


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
