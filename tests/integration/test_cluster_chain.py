"""A chain on a real Slurm on this machine (tests/integration/slurm.py): one hold job keeps the nodes from the
chain's first window to its last, each window and each placeholder a step of it; a production that is a Slurm job
is given back by Slurm only once the chain has ended, one that fairwin runs by the chain's last window."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairwin.files import scan_jsonl
from tests.conftest import PlanFactory
from tests.integration.helpers import fairwin, processes_with, status
from tests.integration.production import production_plan
from tests.integration.slurm import Cluster, fairwin_on, in_job, scheduled_plan, slurm_production
from tests.ports import free_port


def windows_of(plan: Path) -> list[Path]:
    return sorted(p for p in (plan.parent / "windows").iterdir() if p.is_dir() and not p.name.startswith("."))


@dataclass(frozen=True)
class Chained:
    """A chain's first window, submitted on ``node`` and CHAINED: its plan, production's job, the hold job."""

    plan: Path
    production: str
    job: str
    said: str  # what `fairwin submit --chain` printed


def holding(name: str, host: str | None) -> dict[str, Any]:
    """A placeholder that holds on (on ``host``); its last argument tells it apart in the process table."""
    argv = [sys.executable, "-c", "import time; time.sleep(3600)", f"hold-{name}"]
    return {"placeholders": {"gpu": {"argv": argv, **({"host": host} if host else {})}}}


def placeholder_steps(cluster: Cluster, job: str) -> list[str]:
    """The hold job's steps that are placeholders: each name (less its token) and node."""
    listed = cluster.run("squeue", "-h", "-s", "-j", job, "-o", "%j %N").stdout.splitlines()
    return [f"{n.rpartition('-')[0]} {node}" for n, node in map(str.split, listed) if n.startswith("fairwin-hold-")]


@contextlib.contextmanager
def first_window(
    make_plan: PlanFactory, cluster: Cluster, name: str, node: str, far: bool = False
) -> Iterator[Chained]:
    """A Slurm production ``name`` on ``node``, and a chain's first window submitted against it, with a
    placeholder to hold the node until the next; ``far``: the chain holds both nodes, and its placeholder runs on
    the one bound to its second host (n2), the window on the first."""
    with slurm_production(cluster, name, node) as (production, port):
        plan = scheduled_plan(make_plan, name, port, node, chain=holding(name, "far" if far else None))
        if far:
            text = plan.read_text().replace(f'nodes = ["{node}"]', 'nodes = ["n1", "n2"]\nhosts = ["here", "far"]')
            plan.write_text(text)
        first = fairwin_on(cluster, "submit", str(plan), "--chain")
        assert first.returncode == 0, (first.stdout, first.stderr)
        said = first.stdout.splitlines()[0]
        nodes = "n1,n2" if far else node
        assert said.startswith("submitted Slurm job ") and f" to hold the chain's nodes {nodes}" in said, first.stdout
        yield Chained(plan, production, said.split()[3], first.stdout)


def test_a_slurm_chain_holds_one_job_across_its_windows_and_slurm_gives_production_back_after_the_last(
    make_plan: PlanFactory, slurm_cluster: Cluster, scratch_chain_marker: Path
) -> None:
    with first_window(make_plan, slurm_cluster, "prod-chain", "n1") as chain:
        plan, production, job = chain.plan, chain.production, chain.job
        assert f"chain: job {job} holds n1 for the chain's next window" in chain.said
        marker = json.loads(scratch_chain_marker.read_text())
        assert marker["slurm_job"] == job
        # Between the windows: the hold job keeps the node, its placeholder a step of it (started by its batch
        # step, so that it outlived the window's), and production's job waits in the queue.
        assert slurm_cluster.run("squeue", "-h", "-j", job, "-o", "%T %j").stdout.split() == [
            "RUNNING",
            "fairwin-chain",
        ]
        (held,) = marker["placeholders"]
        assert (held["node"], held["slurm_step"].split(".")[0]) == ("n1", job), held
        assert placeholder_steps(slurm_cluster, job) == ["fairwin-hold-gpu n1"]
        assert held["pid"] in processes_with("hold-prod-chain")  # the step's task runs the placeholder
        assert slurm_cluster.run("squeue", "-h", "-j", production, "-o", "%T").stdout.strip() == "PENDING"
        last = fairwin_on(slurm_cluster, "submit", str(plan), "--chain-last")
        assert last.returncode == 0, (last.stdout, last.stderr)
        assert "submitted" not in last.stdout  # no second job: the chain's own
        chained, ended = windows_of(plan)
        events = scan_jsonl(ended / "journal.jsonl")[0]
        down = next(e for e in events if e["step"] == "production down" and e["event"] == "end")
        assert down["placeholders"] == [f"gpu: stopped Slurm step {held['slurm_step']} on node n1 (SIGTERM)"], down
        for window in (chained, ended):
            assert json.loads((window / "window.json").read_text())["cluster"]["job_id"] == job
            steps = [json.loads(path.read_text())["slurm_step"] for path in sorted(window.glob("starts/s*/start.json"))]
            assert len(steps) == 3 and all(step.startswith(f"step {job}.") for step in steps), steps
        assert (status(chained)["chain"]["end"], status(chained)["restore"]["state"]) == ("CHAINED", "CHAINED")
        restore = status(ended)["restore"]
        assert (status(ended)["chain"]["end"], restore["state"], restore["slurm"]["window_job"]) == (
            "ENDED",
            "RESTORED",
            job,
        )
        assert restore["up"]["how"].startswith(f"run again by Slurm: Slurm job {production} (prod-chain) RUNNING")
        assert f"job {job}: cancelled, the chain's nodes let go" in last.stdout
        assert slurm_cluster.run("squeue", "-h", "-t", "all", "-j", job, "-o", "%T").stdout.strip() == "CANCELLED"
        assert slurm_cluster.run("squeue", "-h", "-j", production, "-o", "%T").stdout.strip() == "RUNNING"
        assert not scratch_chain_marker.exists() and processes_with("exp-prod-chain") == []
        assert processes_with("hold-prod-chain") == []


def test_a_slurm_chain_aborted_between_windows_lets_its_nodes_go_and_proves_production_back(
    make_plan: PlanFactory, slurm_cluster: Cluster
) -> None:
    with first_window(make_plan, slurm_cluster, "prod-chain-abort", "n2", far=True) as chain:
        plan, production, job = chain.plan, chain.production, chain.job
        assert placeholder_steps(slurm_cluster, job) == ["fairwin-hold-gpu n2"]  # the window's node is n1
        aborted = fairwin_on(slurm_cluster, "chain", "abort", str(plan))
        assert aborted.returncode == 0, (aborted.stdout, aborted.stderr)
        assert "placeholders gpu: stopped Slurm step " in aborted.stdout and " on node n2 (SIGTERM)" in aborted.stdout
        assert processes_with("hold-prod-chain-abort") == []
        assert f"job {job}: cancelled, the chain's nodes let go" in aborted.stderr  # said as it goes
        assert (
            aborted.stdout.startswith("ABORTED chain-")
            and (f"production RESTORED (run again by Slurm: Slurm job {production} (prod-chain-abort) RUNNING on n2")
            in aborted.stdout
        )
        ledger = scan_jsonl(plan.parent / "windows" / "chains.jsonl")[0]
        assert (ledger[-1]["end"], ledger[-1]["decision"], ledger[-1]["restore"]["state"]) == (
            "ABORTED",
            "REJECT",
            "RESTORED",
        )
        assert slurm_cluster.run("squeue", "-h", "-j", production, "-o", "%T").stdout.strip() == "RUNNING"


def test_a_chained_window_run_as_its_own_batch_job_is_refused_before_production_is_touched(
    make_plan: PlanFactory, slurm_cluster: Cluster
) -> None:
    plan = scheduled_plan(make_plan, "prod-chain-batch", free_port(), "n2")  # refused before it is looked for
    done = in_job(slurm_cluster, plan, "--exclusive", "-w", "n2", "-p", "bench", run=("--chain",))
    assert done.returncode == 2, done.stdout
    assert (
        "fairwin: error: --chain with production as a Slurm job (prod-chain-batch) runs each window as a step of "
        "one allocation held across the chain, else Slurm runs production between them: `fairwin submit PLAN "
        "--chain` holds one"
    ) in done.stdout
    assert not (plan.parent / "windows").exists() or windows_of(plan) == []


def test_a_slurm_chain_is_refused_before_anything_is_queued_where_its_hold_could_not_serve_it(
    make_plan: PlanFactory, slurm_cluster: Cluster
) -> None:
    plan = scheduled_plan(make_plan, "prod-chain-short", free_port(), "n1")
    short = fairwin_on(slurm_cluster, "submit", str(plan), "--chain", "--hold-minutes", "1")
    assert short.returncode == 2, (short.stdout, short.stderr)
    assert "--hold-minutes 1 is shorter than this window's limit (12 min); hold the chain's nodes for at least" in (
        short.stderr
    )
    unfollowed = fairwin_on(slurm_cluster, "submit", str(plan), "--chain", "--no-follow")
    assert unfollowed.returncode == 2
    assert (
        "--no-follow with a chain on Slurm: the follow ends the chain's hold job; run it without" in unfollowed.stderr
    )
    assert slurm_cluster.run("squeue", "-h", "-n", "fairwin-chain", "-o", "%i").stdout.strip() == ""  # none queued


def test_recover_ends_a_chains_hold_job_whose_follow_was_cut_and_proves_production_back(
    make_plan: PlanFactory, slurm_cluster: Cluster
) -> None:
    with first_window(make_plan, slurm_cluster, "prod-chain-cut", "n1") as chain:
        plan, production, job = chain.plan, chain.production, chain.job
        # The last window run in the hold job with no follow after it (as when `fairwin submit`'s was cut).
        run = [sys.executable, "-m", "fairwin", "run", str(plan), "--chain-last", "--quiet"]
        last = slurm_cluster.run("srun", f"--jobid={job}", "--overlap", "-N1", "-n1", "-w", "n1", *run, timeout=240)
        assert last.returncode == 0, (last.stdout, last.stderr)
        ended = windows_of(plan)[-1]
        assert status(ended)["restore"]["state"] == "RETURNING"
        assert slurm_cluster.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "RUNNING"  # still held
        recovered = fairwin_on(slurm_cluster, "recover", str(plan))
        assert recovered.returncode == 0, (recovered.stdout, recovered.stderr)
        assert recovered.stdout == f"window {ended.name}: production RESTORED from Slurm\n"
        returned = [e for e in scan_jsonl(ended / "journal.jsonl")[0] if e["step"] == "return" and e["event"] == "end"]
        assert [e["hold_job_cancelled"] for e in returned] == [job]
        restore = status(ended)["restore"]
        assert (restore["state"], restore["slurm"]["window_job"]) == ("RESTORED", job)
        assert slurm_cluster.run("squeue", "-h", "-j", production, "-o", "%T").stdout.strip() == "RUNNING"


def own_production_chain(
    make_plan: PlanFactory, cluster: Cluster, name: str, node: str, stop_production: list[Path]
) -> tuple[Path, str]:
    """A production fairwin runs here (up), and a chain's first window on ``node`` submitted against it, with a
    placeholder: the plan, and the chain's hold job."""
    plan = production_plan(make_plan, name, chain=holding(name, None))
    plan.write_text(plan.read_text() + f'\n[cluster]\nscheduler = "slurm"\nnodes = ["{node}"]\n')
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    first = fairwin_on(cluster, "submit", str(plan), "--chain")
    assert first.returncode == 0, (first.stdout, first.stderr)
    job = first.stdout.split()[3]
    assert first.stdout.startswith(f"submitted Slurm job {job} to hold the chain's nodes {node}"), first.stdout
    return plan, job


def test_a_chain_on_the_cluster_whose_production_fairwin_runs_holds_its_nodes_in_one_job_too(
    make_plan: PlanFactory, slurm_cluster: Cluster, stop_production: list[Path], scratch_chain_marker: Path
) -> None:
    plan, job = own_production_chain(make_plan, slurm_cluster, "own-chain", "n2", stop_production)
    # Between the windows: production down, its node held by the chain's job, the placeholder a step of it.
    assert json.loads(scratch_chain_marker.read_text())["slurm_job"] == job
    assert slurm_cluster.run("squeue", "-h", "-j", job, "-o", "%T %j").stdout.split() == ["RUNNING", "fairwin-chain"]
    assert placeholder_steps(slurm_cluster, job) == ["fairwin-hold-gpu n2"]
    assert processes_with("--model own-chain") == []
    last = fairwin_on(slurm_cluster, "submit", str(plan), "--chain-last")
    assert last.returncode == 0, (last.stdout, last.stderr)
    assert "submitted" not in last.stdout and f"job {job}: cancelled, the chain's nodes let go" in last.stdout
    chained, ended = windows_of(plan)
    assert [json.loads((w / "window.json").read_text())["cluster"]["job_id"] for w in (chained, ended)] == [job, job]
    assert (status(ended)["chain"]["end"], status(ended)["restore"]["state"]) == ("ENDED", "RESTORED")
    assert slurm_cluster.run("squeue", "-h", "-t", "all", "-j", job, "-o", "%T").stdout.strip() == "CANCELLED"
    assert len(processes_with("--model own-chain")) == 1  # restored by the last window, and running
    assert not scratch_chain_marker.exists() and processes_with("hold-own-chain") == []


def test_recover_ends_the_hold_job_of_a_chain_whose_last_window_restored_production_itself(
    make_plan: PlanFactory, slurm_cluster: Cluster, stop_production: list[Path], scratch_chain_marker: Path
) -> None:
    plan, job = own_production_chain(make_plan, slurm_cluster, "cut-chain", "n1", stop_production)
    # The last window run in the hold job with no follow after it (as when `fairwin submit`'s was cut).
    run = [sys.executable, "-m", "fairwin", "run", str(plan), "--chain-last", "--quiet"]
    last = slurm_cluster.run("srun", f"--jobid={job}", "--overlap", "-N1", "-n1", "-w", "n1", *run, timeout=240)
    assert last.returncode == 0, (last.stdout, last.stderr)
    assert slurm_cluster.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "RUNNING"  # still held
    recovered = fairwin_on(slurm_cluster, "recover", str(plan))
    assert (recovered.returncode, recovered.stdout) == (
        0,
        f"Slurm job {job}, the hold job of a chain that ended, cancelled\n",
    ), recovered.stderr
    assert slurm_cluster.run("squeue", "-h", "-t", "all", "-j", job, "-o", "%T").stdout.strip() == "CANCELLED"
    assert len(processes_with("--model cut-chain")) == 1
