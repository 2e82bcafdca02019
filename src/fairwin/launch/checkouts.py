"""The pinned checkouts a role's processes run from, and the check that each is at its commit and clean.

A role (or one of its workers) may pin the repository it runs from (``repo``: path and commit); the
window checks every such checkout on its own host before production is taken down, ``fairwin stage``
before it stages anything, and each start again before it launches.
"""

from __future__ import annotations

from fairwin.errors import RuntimeCheckError
from fairwin.launch.identity import checkout
from fairwin.launch.spec import LaunchSpec, make_spec, worker_specs
from fairwin.plan.roles import RepoPin, Worker
from fairwin.plan.site import Site


def role_specs(site: Site, name: str) -> list[tuple[LaunchSpec, Worker | None]]:
    """A role's processes in launch order, outside any start: each worker with its plan entry, then the head (None)."""
    plan = site.plan
    head = make_spec(name, plan.roles, site.base_dir, site.places)
    workers = worker_specs(head, plan.roles, site.base_dir, site.places)
    return [*zip(workers, plan.roles[name].workers, strict=True), (head, None)]


def pinned_checkouts(site: Site) -> list[tuple[LaunchSpec, RepoPin]]:
    """Every process of these roles whose host holds a pinned checkout, with its pin."""
    found = []
    for name in site.roles:
        for spec, worker in role_specs(site, name):
            pin = worker.repo if worker is not None else site.plan.roles[name].repo
            if pin is not None:
                found.append((spec, pin))
    return found


def check_checkout(label: str, pin: RepoPin, head: str | None, changed: list[str]) -> dict[str, str]:
    """The pinned checkout is at its commit with nothing tracked uncommitted; raises naming what is there."""
    if head is None:
        raise RuntimeCheckError(f"{label}: {pin.path} is not a git checkout there (or git is missing)")
    if not head.startswith(pin.commit):
        raise RuntimeCheckError(
            f"{label}: {pin.path} is at {head[:12]}, not the pinned {pin.commit[:12]}; bring it "
            "there first (`fairwin stage`, or git checkout on the host)"
        )
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        raise RuntimeCheckError(
            f"{label}: {pin.path} is at {head[:12]} but has uncommitted changes ({', '.join(changed[:3])}{more})"
        )
    return {"path": pin.path, "commit": head}


async def check_checkouts(pinned: list[tuple[LaunchSpec, RepoPin]]) -> dict[str, dict[str, str]]:
    """Each pinned checkout at its commit and clean, on its own host: label -> {path, commit}."""
    return {spec.label: check_checkout(spec.label, pin, *(await checkout(spec, pin.path))) for spec, pin in pinned}
