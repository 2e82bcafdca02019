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
from fairwin.launch.scheduler import config_value, hostnames, job_fields, node_address, slurm
from fairwin.plan.cluster import ClusterSettings
from fairwin.plan.hosts import SlurmNode


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
    """The window's allocation, and why it may not run in it (nothing: every declared node, or as many as it
    counts with its constraint, is its alone)."""
    job_id = env.get("SLURM_JOB_ID")
    if not job_id:
        asked = f"-w {','.join(cluster.nodes)}" if cluster.nodes else f"-N {cluster.count}"
        asked += f" -C '{cluster.constraint}'" if cluster.constraint else ""
        return None, [
            f"[cluster] scheduler is slurm, and this window runs outside a Slurm job: run it in an exclusive "
            f"allocation of its nodes (sbatch --exclusive {asked} ... fairwin run PLAN), so that Slurm holds them"
        ]
    try:
        found = read_allocation(job_id)
        problems = _missing(cluster, found) if cluster.nodes else _too_few(cluster, found)
    except SchedulerError as exc:
        return None, [f"Slurm job {job_id}'s allocation cannot be read: {exc}"]
    if not found.exclusive:
        problems.append(
            f"Slurm job {job_id} shares its nodes (it was not submitted with --exclusive): another job may run "
            "beside the window's"
        )
    return found, problems


def _missing(cluster: ClusterSettings, found: Allocation) -> list[str]:
    """Each declared node the job does not hold, and what holds it."""
    return [
        f"node {node} is not in Slurm job {found.job_id}'s allocation ({','.join(found.nodes) or 'none'}): "
        f"{holders(node)}"
        for node in cluster.nodes
        if node not in found.nodes
    ]


def _too_few(cluster: ClusterSettings, found: Allocation) -> list[str]:
    """Fewer nodes than the plan counts, or a job not asked for the plan's constraint (Slurm gives a job only nodes
    with the features it asked for, so the job's own request is what proves its nodes have them)."""
    problems = []
    if len(found.nodes) < (cluster.count or 0):
        problems.append(
            f"Slurm job {found.job_id} holds {len(found.nodes)} node(s), and the plan needs {cluster.count}"
        )
    if cluster.constraint is not None:
        asked = job_fields(found.job_id).get("Features", "(null)")
        if asked != cluster.constraint:
            problems.append(
                f"Slurm job {found.job_id} was not asked for nodes with {cluster.constraint} (its constraint: "
                f"{asked}): submit it with -C '{cluster.constraint}'"
            )
    return problems


def allocated(
    cluster: ClusterSettings, env: Mapping[str, str]
) -> tuple[Allocation | None, dict[str, SlurmNode], list[str]]:
    """:func:`allocation_problems`, and where the window may run in its job, the plan's ``[cluster] hosts`` bound
    to the job's nodes (recorded in the allocation too)."""
    found, problems = allocation_problems(cluster, env)
    if found is None or problems or not cluster.hosts:
        return found, {}, problems
    try:
        bound = bind_hosts(cluster, found, env.get("SLURMD_NODENAME"))
    except SchedulerError as exc:
        return found, {}, [f"the nodes of Slurm job {found.job_id} cannot be read: {exc}"]
    return found.model_copy(update={"hosts": {name: b.node for name, b in bound.items()}}), bound, []


def bind_hosts(cluster: ClusterSettings, found: Allocation, here: str | None) -> dict[str, SlurmNode]:
    """``[cluster] hosts`` bound in order to the job's nodes: the first to ``here``, the node the window runs on,
    then the others in the plan's order (or Slurm's, for a count). SchedulerError where a node's address cannot be
    read."""
    order = [node for node in cluster.nodes if node in found.nodes] or found.nodes
    ordered = [*([here] if here in found.nodes else []), *(node for node in order if node != here)]
    return {
        name: SlurmNode(node=node, job_id=found.job_id, address=node_address(node))
        for name, node in zip(cluster.hosts, ordered, strict=False)
    }


#: Process tracking that follows a process's parents (or its group): production that fairwin launches detached, in
#: a session of its own under init, is not the job's, and outlives it. cgroup tracking keeps every descendant.
ESCAPABLE_TRACKING = frozenset({"proctrack/linuxproc", "proctrack/pgid"})


def production_outlives_job(production_role: str, job_id: str) -> list[str]:
    """Why a production fairwin launches on the window's node would end with the window's job (nothing where the
    cluster's process tracking lets a detached process go): restored inside the job, it would be Slurm's to kill
    when the job ends, after fairwin proved it back. Tracking that cannot be read refuses too."""
    try:
        tracking = config_value("ProctrackType")
    except SchedulerError as exc:
        return [f"the cluster's process tracking cannot be read ({exc}): production is not proved to outlive the job"]
    if tracking in ESCAPABLE_TRACKING:
        return []
    return [
        f"production (role {production_role}) would be launched on the window's node, inside Slurm job {job_id}, "
        f"and the cluster tracks processes with {tracking}: the job's end would end production after fairwin "
        "restored it; run production as a Slurm job (production.slurm_job), or on a [hosts.NAME] off the cluster"
    ]
