"""Slurm holds the hardware: a window of a plan with ``[cluster] scheduler = "slurm"`` runs only inside an
exclusive allocation of every node the plan declares.

Outside a Slurm job, or in one that shares its nodes or lacks one of them, the window is refused before
production is touched, naming the node and what holds it. What Slurm said of the job is read with its own
commands (``scontrol``, ``squeue``) through the one command seam; a scheduler that does not answer is a
refusal too: a check that cannot see fails closed.
"""

from __future__ import annotations

from collections.abc import Mapping

from fairwin.directory.manifest import Allocation
from fairwin.errors import SchedulerError
from fairwin.launch.scheduler import hostnames, job_fields, slurm
from fairwin.plan.cluster import ClusterSettings


def read_allocation(job_id: str) -> Allocation:
    """The job's partition, nodes (expanded) and whether it holds them alone (``OverSubscribe=NO``)."""
    fields = job_fields(job_id)
    return Allocation(
        job_id=job_id,
        partition=fields.get("Partition", ""),
        nodes=hostnames(fields.get("NodeList", "")),
        exclusive=fields.get("OverSubscribe") == "NO",
    )


def holders(node: str) -> str:
    """What holds ``node`` now, in words: each job on it (id, partition, user, state, name), or that none does."""
    lines = slurm("squeue", "-h", "-w", node, "-o", "%i %P %u %T %j").splitlines()
    jobs = [line.split(maxsplit=4) for line in lines if line.strip()]
    if not jobs:
        return "no job holds it"
    shown = [f"job {j[0]} ({', '.join(j[1:])})" if len(j) == 5 else " ".join(j) for j in jobs]
    return "held by " + "; ".join(shown)


def allocation_problems(cluster: ClusterSettings, env: Mapping[str, str]) -> tuple[Allocation | None, list[str]]:
    """The window's allocation, and why it may not run in it (nothing: every declared node is its alone)."""
    job_id = env.get("SLURM_JOB_ID")
    if not job_id:
        nodes = ",".join(cluster.nodes)
        return None, [
            f"[cluster] scheduler is slurm, and this window runs outside a Slurm job: run it in an exclusive "
            f"allocation of its nodes (sbatch --exclusive -w {nodes} ... fairwin run PLAN), so that Slurm holds them"
        ]
    try:
        found = read_allocation(job_id)
        problems = [
            f"node {node} is not in Slurm job {job_id}'s allocation ({','.join(found.nodes) or 'none'}): "
            f"{holders(node)}"
            for node in cluster.nodes
            if node not in found.nodes
        ]
    except SchedulerError as exc:
        return None, [f"Slurm job {job_id}'s allocation cannot be read: {exc}"]
    if not found.exclusive:
        problems.append(
            f"Slurm job {job_id} shares its nodes (it was not submitted with --exclusive): another job may run "
            "beside the window's"
        )
    return found, problems
