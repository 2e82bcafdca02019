"""``[cluster]``: the scheduler that owns the hardware, and the nodes a window needs of it.

With ``scheduler = "slurm"`` Slurm holds the hardware: a window runs only inside an exclusive
allocation of every node it declares (custody/slurm.py checks it before production is touched).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fairwin.plan.base import StrictModel


class ClusterSettings(StrictModel):
    """The cluster's scheduler and what a window asks of it."""

    scheduler: Literal["slurm"] = Field(description="The scheduler that allocates the nodes: slurm.")
    nodes: list[str] = Field(min_length=1, description="The nodes a window needs, by name, allocated to it alone.")
    partition: str | None = Field(None, description="The partition a window's job asks for (sbatch -p).")
    account: str | None = Field(None, description="The account it is charged to (sbatch -A).")
    qos: str | None = Field(None, description="Its quality of service (sbatch --qos).")
