"""``[cluster]``: the scheduler that owns the hardware, and the nodes a window needs of it.

With ``scheduler = "slurm"`` Slurm holds the hardware: a window runs only inside an exclusive
allocation of every node it declares, or of as many as it counts, with the features its constraint
names (custody/slurm.py checks it before production is touched).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from fairwin.plan.base import StrictModel


class ClusterSettings(StrictModel):
    """The cluster's scheduler and what a window asks of it: its nodes by name, or how many and of what kind."""

    scheduler: Literal["slurm"] = Field(description="The scheduler that allocates the nodes: slurm.")
    nodes: list[str] = Field(
        default_factory=list, description="The nodes a window needs, by name, allocated to it alone (or count)."
    )
    count: int | None = Field(
        None, ge=1, description="Instead of nodes: how many nodes, whichever Slurm allocates (sbatch -N)."
    )
    constraint: str | None = Field(
        None, description="The features its nodes must have (sbatch -C, Slurm's syntax: 'a100&nvlink')."
    )
    hosts: list[str] = Field(
        default_factory=list,
        description="The plan's hosts on the cluster, bound in order to the job's nodes (the first to the node the "
        "window runs on): a role or worker with host = NAME runs as a Slurm step on that node.",
    )
    partition: str | None = Field(None, description="The partition a window's job asks for (sbatch -p).")
    account: str | None = Field(None, description="The account it is charged to (sbatch -A).")
    qos: str | None = Field(None, description="Its quality of service (sbatch --qos).")

    @model_validator(mode="after")
    def _named_or_counted(self) -> ClusterSettings:
        if bool(self.nodes) == (self.count is not None):
            raise ValueError("name the nodes a window needs (nodes = [...]) or how many (count = N), one of the two")
        if len(self.hosts) > (self.count or len(self.nodes)):
            raise ValueError(f"hosts: {len(self.hosts)} hosts for {self.count or len(self.nodes)} node(s); one each")
        if len(set(self.hosts)) < len(self.hosts):
            raise ValueError("hosts: each host is bound to a node of its own; name each once")
        return self

    @property
    def wanted(self) -> str:
        """What a window asks for, in words: its nodes by name, or how many and of what kind."""
        kind = f" with {self.constraint}" if self.constraint else ""
        return ",".join(self.nodes) + kind if self.nodes else f"{self.count} node(s){kind}"
