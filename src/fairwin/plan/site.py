"""The site: where a window's processes run, every host resolved once.

A plan names hosts (``[hosts.NAME]``) and says which role, worker, placeholder and production
runs on which. Custody, telemetry, production and launch need the answer, not the plan's
spelling of it: :class:`Site` is built once where hardware is held or read (a window's
admission for its mode's two roles, ``stage`` for the roles it stages, ``recover``,
``production`` and ``chain`` for every role) and handed to them. Its hosts are resolved (keys
and ``known_hosts`` made absolute), so no module resolves one itself; which hosts the window
touches, production's host and the hardware lock's keys are answered here, and nowhere else.
Pure: nothing here contacts a host.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from fairwin.plan.hosts import Host, Place, SlurmNode, resolved
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.models import Plan


@dataclass(frozen=True)
class Site:
    """The plan and its file, the roles whose processes the site runs, and every host resolved."""

    plan: Plan
    path: Path  # the plan's file: its relative paths start beside it
    roles: tuple[str, ...]  # the roles this site launches or stops, sorted
    hosts: Mapping[str, Host]  # every [hosts.NAME], resolved
    nodes: Mapping[str, SlurmNode] = field(default_factory=dict)  # [cluster] hosts, once bound to the job's nodes

    @classmethod
    def of(cls, loaded: LoadedPlan, roles: Iterable[str] | None = None) -> Site:
        """The site of ``roles`` (None: every role the plan declares)."""
        return cls.at(loaded.plan, loaded.path, roles)

    @classmethod
    def at(cls, plan: Plan, path: Path, roles: Iterable[str] | None = None) -> Site:
        """The site of ``plan`` read from ``path`` (a window's copy of its plan, say) and ``roles`` (None: all)."""
        names = plan.roles if roles is None else roles
        hosts = {name: resolved(host, path.parent) for name, host in plan.hosts.items()}
        return cls(plan, path, tuple(sorted(set(names))), hosts)

    @classmethod
    def for_mode(cls, loaded: LoadedPlan, mode_name: str) -> Site:
        """The site of a window of ``mode_name``: its control's and candidate's (none for a mode not declared)."""
        mode = loaded.plan.all_modes().get(mode_name)
        return cls.of(loaded, mode.roles if mode is not None else ())

    def bound(self, nodes: Mapping[str, SlurmNode]) -> Site:
        """The site inside the window's Slurm job: ``[cluster] hosts`` bound to its nodes."""
        return replace(self, nodes=dict(nodes))

    @property
    def places(self) -> dict[str, Place]:
        """Every host a role's process may run on, by name: [hosts] over SSH, and the job's bound nodes."""
        return {**self.hosts, **self.nodes}

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    def host(self, name: str) -> Host:
        """The ``[hosts.NAME]`` resolved (a name the plan's validation has checked)."""
        return self.hosts[name]

    def where(self, name: str | None) -> Host | None:
        """:meth:`host`, None for fairwin's own machine."""
        return None if name is None else self.hosts[name]

    def resolve(self, path: Path) -> Path:
        """A path the plan gives, relative to the plan's file."""
        return path if path.is_absolute() else (self.base_dir / path).resolve()

    @property
    def production_host(self) -> str | None:
        """The host production runs on (its role's, or where it is managed); None: here or no production."""
        settings = self.plan.production
        if settings is None:
            return None
        return self.plan.roles[settings.role].host if settings.role is not None else settings.host

    @property
    def touched(self) -> list[str | None]:
        """Production's host and each role's and worker's, in that order, once each (None: here)."""
        found: list[str | None] = [self.production_host] if self.plan.production is not None else []
        for name in self.roles:
            role = self.plan.roles[name]
            found += [role.host, *(worker.host for worker in role.workers)]
        return list(dict.fromkeys(found))

    @property
    def remote(self) -> dict[str, Host]:
        """Every other host the site touches over SSH, by name, resolved (not a Slurm node's: :attr:`nodes`)."""
        return {name: self.hosts[name] for name in self.touched if name is not None and name in self.hosts}

    @property
    def lock_keys(self) -> list[str]:
        """The hardware lock's keys: every host touched by address, and this machine's always (whatever holds the
        hardware runs from here: a window's client, a stage's commands). On a cluster the nodes Slurm allocates
        stand for this machine (fairwin runs on the first of them): two windows on two nodes of one machine, as
        the tests' cluster has, are two pieces of hardware."""
        cluster = self.plan.cluster
        if cluster is None:
            return host_keys(self.where(name) for name in self.touched)
        remote = [f"ssh://{host.address}:{host.port}" for host in self.remote.values()]
        if not cluster.nodes:  # counted: which nodes is Slurm's choice; the job it made holds them alone
            return sorted({f"slurm-job://{os.environ.get('SLURM_JOB_ID', 'none')}"} | set(remote))
        return sorted({f"slurm://{node}" for node in cluster.nodes} | set(remote))


def host_keys(hosts: Iterable[Host | None]) -> list[str]:
    """The lock keys of these hosts (None: this machine), by address, and this machine's."""
    here = f"local://{socket.gethostname()}"
    return sorted({here} | {f"ssh://{host.address}:{host.port}" if host is not None else here for host in hosts})
