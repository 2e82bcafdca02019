"""Slurm's own commands (``scontrol``, ``squeue``, ``sbatch``), run through the one command seam.

What Slurm answers is read here for every part that asks it: the allocation check, ``fairwin submit``'s follow,
production run as a Slurm job. A command that cannot be run or fails is a SchedulerError: a check that cannot see
fails closed.
"""

from __future__ import annotations

import re

from fairwin.commands import runner
from fairwin.errors import SchedulerError

#: How long one of Slurm's own commands may take to answer.
SLURM_TIMEOUT_S = 15.0
_PAIR = re.compile(r"(\w+)=(\S*)")
#: The states after which a job runs no more (squeue's long names).
ENDED = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
)


def slurm(*argv: str) -> str:
    """What one of Slurm's commands answers; SchedulerError where it cannot be run or fails."""
    try:
        ran = runner().run(list(argv), timeout_s=SLURM_TIMEOUT_S)
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


def node_state(node: str) -> str:
    """A node's state as slurmctld holds it (``IDLE``, ``ALLOCATED+NOT_RESPONDING``, ``DOWN``...)."""
    return _shown("node", node).get("State", "unknown")
