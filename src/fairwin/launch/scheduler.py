"""Slurm's own commands (``scontrol``, ``squeue``, ``sbatch``, ``srun``), run through the one command seam.

What Slurm answers is read here for every part that asks it: the allocation check, ``fairwin submit``'s follow,
production run as a Slurm job. A command that cannot be run or fails is a SchedulerError: a check that cannot see
fails closed. A command on another node of the window's job runs there as a step of it (:func:`srun_argv`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fairwin.commands import runner
from fairwin.errors import SchedulerError

#: How long one of Slurm's own commands may take to answer.
SLURM_TIMEOUT_S = 15.0
_PAIR = re.compile(r"(\w+)=(\S*)")
#: The states after which a job runs no more (squeue's long names).
ENDED = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
)


def slurm(*argv: str, timeout_s: float = SLURM_TIMEOUT_S) -> str:
    """What one of Slurm's commands answers; SchedulerError where it cannot be run or fails."""
    try:
        ran = runner().run(list(argv), timeout_s=timeout_s)
    except (OSError, TimeoutError) as exc:
        raise SchedulerError(f"`{' '.join(argv)}` could not be run ({exc})") from None
    if ran.status != 0:
        said = (ran.err or ran.out).strip().splitlines()
        raise SchedulerError(f"`{' '.join(argv)}` failed: {said[-1] if said else f'exit {ran.status}'}")
    return ran.out


def _shown(entity: str, name: str) -> dict[str, str]:
    """What ``scontrol show ENTITY -o NAME`` says, field by field."""
    return dict(_PAIR.findall(slurm("scontrol", "show", entity, "-o", name)))


def job_fields(job_id: str) -> dict[str, str]:
    """What ``scontrol show job -o`` says of a job, field by field (Slurm keeps an ended job for MinJobAge)."""
    return _shown("job", job_id)


def hostnames(compact: str) -> list[str]:
    """A node list Slurm compacted (``n[1-2]``), expanded; none for an empty or ``(null)`` one."""
    if not compact or compact == "(null)":
        return []
    return slurm("scontrol", "show", "hostnames", compact).split()


def node_address(node: str) -> str:
    """Where a node answers (Slurm's NodeAddr): the address its servers are reached at."""
    return _shown("node", node).get("NodeAddr") or node


def node_state(node: str) -> str:
    """A node's state as slurmctld holds it (``IDLE``, ``ALLOCATED+NOT_RESPONDING``, ``DOWN``...)."""
    return _shown("node", node).get("State", "unknown")


def srun_argv(
    job_id: str, node: str, argv: Sequence[str], name: str = "fairwin-probe", flags: Sequence[str] = ()
) -> list[str]:
    """``argv`` on ``node`` as a step of job ``job_id`` beside its other steps (``--overlap``): one task, named."""
    srun = ["srun", "--overlap", f"--jobid={job_id}", "-N1", "-n1", "-w", node, "-J", name, "--quiet", *flags]
    return [*srun, "--", *argv]


def on_node(job_id: str, node: str, argv: Sequence[str], timeout_s: float = SLURM_TIMEOUT_S) -> str:
    """What ``argv`` prints on a node of the job, run there by srun; SchedulerError where it fails or cannot run."""
    return slurm(*srun_argv(job_id, node, argv), timeout_s=timeout_s)


def steps_named(job_id: str) -> dict[str, str]:
    """The job's running steps, each id (``JOB.STEP``) by its name (``squeue -s``)."""
    listed = (line.split() for line in slurm("squeue", "-h", "-s", "-j", job_id, "-o", "%i %j").splitlines())
    return {words[1]: words[0] for words in listed if len(words) == 2}


def step_pids(step_id: str, node: str, away: bool) -> list[int]:
    """The step's processes on ``node`` (``scontrol listpids``, read on that node: through srun where ``away``).

    Never pid 1: a placeholder's step just made was once recorded as "pid 1" and then found "not running" (its
    command was init's), so a listing of pid 1 counts as no task yet, and whoever waits for the task waits on."""
    argv = ["scontrol", "listpids", step_id, node]
    said = on_node(step_id.split(".")[0], node, argv) if away else slurm(*argv)
    rows = (line.split() for line in said.splitlines()[1:])
    pids = (int(words[0]) for words in rows if words and words[0].isdigit())
    return [pid for pid in pids if pid > 1]


def config_value(key: str) -> str:
    """One setting of the cluster's configuration as slurmctld holds it (``scontrol show config``)."""
    for line in slurm("scontrol", "show", "config").splitlines():
        name, _, value = line.partition("=")
        if name.strip() == key:
            return value.strip()
    raise SchedulerError(f"`scontrol show config` names no {key}")
