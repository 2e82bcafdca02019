"""``[cluster]``: the scheduler that owns the hardware, and the nodes a window needs of it.

With ``scheduler = "slurm"`` Slurm holds the hardware: a window runs only inside an exclusive
allocation of every node it declares, or of as many as it counts, with the features its constraint
names (custody/slurm.py checks it before production is touched).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from fairwin.plan.base import StrictModel

if TYPE_CHECKING:
    from fairwin.plan.production import ProductionSettings
    from fairwin.plan.roles import Role


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

    def check_bound(
        self, roles: Mapping[str, Role], ssh_hosts: set[str], production: ProductionSettings | None
    ) -> None:
        """What may run on a host bound to a node of the window's job: a role's or worker's process, not a
        container, not production (a Slurm production is a job of its own, on nodes named for it)."""
        if clash := sorted(set(self.hosts) & ssh_hosts):
            raise ValueError(f"cluster.hosts: {', '.join(clash)} is a [hosts] table too; a host is one or the other")
        for name, role in roles.items():
            members = [("host", role.host, role.container)]
            members += [(f"workers[{i}].host", w.host, w.container) for i, w in enumerate(role.workers)]
            for key, host, box in members:
                if host in self.hosts and box is not None:
                    raise ValueError(f"roles.{name}.{key}: a container does not run on a Slurm node's host yet")
        if production is None:
            return
        if production.slurm_job is not None and self.count is not None:
            raise ValueError(
                "production.slurm_job: a window takes production's nodes from it; name them in [cluster] nodes "
                "instead of a count"
            )
        if production.role is not None and production.role in roles and roles[production.role].host in self.hosts:
            raise ValueError(
                f"production.role: role {production.role} runs on a host of [cluster] hosts, a node of the window's "
                "own job; production on a Slurm node runs as a Slurm job (slurm_job)"
            )
