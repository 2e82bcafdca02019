"""Production as it runs, read after the gates and before the take-down; each role compared with it is checked
then, before anything is stopped, and again at each of its starts (window/processes.py).

A role is compared with production's live processes when it says so (``compare_live``) or when it derives
from production's role (``base``): its head with production's head, its worker N with production's worker N,
in environment and speculative config, beyond its ``allowed_env_differences``. The reading is kept in
production's state directory; the next window names what changed since.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from fairwin.directory.declaration import LiveMember
from fairwin.errors import ProductionError, RuntimeCheckError
from fairwin.launch.container import expected_env
from fairwin.launch.inspect import image_env
from fairwin.launch.runtime_cli import RuntimeCli
from fairwin.launch.shell import shell
from fairwin.launch.spec import LaunchSpec, make_spec, worker_specs
from fairwin.launch.speculative import stated_speculative
from fairwin.plan.hosts import Host
from fairwin.plan.production import LiveProcess
from fairwin.plan.site import Site
from fairwin.production.control import Production
from fairwin.production.live import (
    LiveProduction,
    changes,
    keep,
    live_plan,
    read_member,
    stored,
)
from fairwin.production.runtime_checks import (
    SESSION_VARIABLES,
    check_live_env,
    check_live_observed,
    check_live_speculative,
)


def compares_live(site: Site, role_name: str) -> bool:
    """Whether the role is checked against production's live processes."""
    role, production = site.plan.roles[role_name], site.plan.production
    if role.compare_live is not None:
        return role.compare_live
    return production is not None and production.role is not None and role.base == production.role


async def read_live(site: Site, production: Production) -> LiveProduction:
    """Every process of production the plan says how to find, each on its own host."""
    members = []
    for member, host_name, process in live_plan(site):
        host = _host(site, host_name)
        if process is None and production.spec is not None and production.spec.container is not None:
            box = production.spec.container  # fairwin runs production as a container: read as one
            process = LiveProcess(container=production.container, runtime=box.runtime, runtime_env=box.runtime_env)
        pid = await production.recorded_pid() if process is None else None
        log = production.log_on_host() if process is None else None  # the server fairwin launched: its own log
        if process is not None and process.log is not None and host_name is None:  # relative: to the plan, here
            process = process.model_copy(update={"log": str(site.resolve(Path(process.log)))})
        members.append(await read_member(member, (host_name, host), process, pid, log))
    return LiveProduction(tuple(members), time.time())


async def production_as_it_runs(
    site: Site, production: Production, say: Callable[[str], None]
) -> tuple[LiveProduction | None, list[str]]:
    """Production read before the take-down (else its last reading), and why a compared role of the site differs
    from it or has nothing to be compared with ([] when none does)."""
    compared = [r for r in site.roles if compares_live(site, r)]
    settings = site.plan.production
    if settings is None or (settings.role is None and settings.live is None):
        return None, []
    try:
        live = await read_live(site, production)
    except ProductionError as exc:
        kept = stored(production.state_dir)
        if kept is None and compared:
            return None, [
                f"role {compared[0]} is compared with production as it runs, but {exc}; bring "
                "production up so it can be read, then run the window"
            ]
        say(f"production as it runs: not read ({exc})" + (f"; comparing with {kept.from_snapshot}" if kept else ""))
        if kept is None:
            return None, []
        live = kept
    else:
        before = stored(production.state_dir)
        if before is not None and (changed := changes(before, live)):
            live.changed.extend(changed)
            say(f"warning: production changed since its last reading ({before.from_snapshot}): {'; '.join(changed)}")
        keep(production.state_dir, live)
    return live, [problem for role in compared for problem in await live_problems(site, role, live)]


async def live_problems(site: Site, role_name: str, live: LiveProduction) -> list[str]:
    """The role's head and workers as they would run on their hosts (that host's login env plus what the plan
    declares) against production's live processes: the first difference, before production is touched."""
    plan = site.plan
    head = make_spec(role_name, plan.roles, site.base_dir, site.places)
    specs = [*worker_specs(head, plan.roles, site.base_dir, site.places), head]
    try:
        for spec in specs:
            member = counterpart(spec, live)
            if member is None:
                continue
            if spec.member == "head":
                check_live_observed(spec.label, member, plan.runtime)  # unobserved: refused now, not at its start
                stated = stated_speculative(spec.argv)
                if stated is not None:  # else what the server reports is read at its start
                    check_live_speculative(spec.label, member, stated, plan.runtime)
            check_live_env(spec.label, member, await would_run_with(spec, member), spec.allowed_env_differences)
            if spec.container is not None:
                mounts = [declared_mount(m) for m in spec.container.mounts]
                check_live_container(spec, member, mounts, await image_id_of(spec))
            elif member.mounts is not None:
                check_live_container(spec, member, None, None)
    except RuntimeCheckError as exc:
        return [f"before production is taken down: {exc}"]
    return []


def counterpart(spec: LaunchSpec, live: LiveProduction) -> LiveMember | None:
    """Production's process a role's process is compared with (the same member); None for a worker when
    production lists no workers; RuntimeCheckError when it lists some but not this one."""
    member = live.member(spec.member)
    workers = [m for m in live.members if m.member != "head"]
    if member is None and (spec.member == "head" or workers):
        raise RuntimeCheckError(
            f"{spec.label}: production's live processes have no {spec.member} to compare it "
            "with; list it under [production.live] workers"
        )
    return member


async def would_run_with(spec: LaunchSpec, live: LiveMember) -> dict[str, str]:
    """The whole environment the process will be given: fairwin's own here, the host's login one there (as
    a role's server is launched: ``env -i`` with it), then the declared variables; a container's: its image's,
    then the declared ones, and what a runtime sets itself as production's container has it."""
    if spec.container is not None:
        code, out, _ = await RuntimeCli.of(spec.container, spec.host, spec.over_ssh()).run(
            "image", "inspect", spec.container.image
        )
        return expected_env(spec.env, image_env(out) if code == 0 else {}, live.env)
    if spec.remote is None or spec.host is None:
        return spec.env
    base: dict[str, str] = {}
    if spec.inherit_env:
        from fairwin.launch.ssh import parse_env  # asyncssh only where a host is used

        code, out = await shell(spec.host, spec.remote, "env -0", retry="read")
        base = parse_env(out) if code == 0 else {}
    return {**{k: v for k, v in base.items() if k not in SESSION_VARIABLES}, **spec.declared_env}


def _host(site: Site, name: str | None) -> Host | None:
    if name is None:
        return None
    return site.host(name)


def declared_mount(mount: str) -> dict[str, str]:
    """A plan's ``SOURCE:DESTINATION[:OPTIONS]`` as inspect reports a mount."""
    source, destination, *options = mount.split(":")
    read_only = "ro" in ",".join(options).split(",")
    return {"source": source, "destination": destination, "mode": "ro" if read_only else "rw"}


async def image_id_of(spec: LaunchSpec) -> str | None:
    """The id of the image a container role would run, on its host; None where the runtime does not know it."""
    assert spec.container is not None
    cli = RuntimeCli.of(spec.container, spec.host, spec.over_ssh())
    code, out, _ = await cli.run("image", "inspect", "--format", "{{.Id}}", spec.container.image)
    return out.strip().removeprefix("sha256:") if code == 0 and out.strip() else None


def check_live_container(
    spec: LaunchSpec, live: LiveMember, mounts: list[dict[str, str]] | None, image: str | None
) -> None:
    """A process compared with a container production is a container too, with production's mounts (by
    destination: the same source and mode) and image, beyond its allowed mount differences (and image, where
    ``allowed_image_difference``); raises naming the first difference."""
    if live.mounts is None:
        return
    if mounts is None:
        raise RuntimeCheckError(
            f"{spec.label}: {live.label} is a container ({live.found_by}) and {spec.label} is not, so their mounts "
            "and images cannot be compared; run it as a container ([roles.NAME.container])"
        )
    allowed = set(spec.allowed_mount_differences)
    theirs = {m["destination"]: m for m in live.mounts}
    mine = {m["destination"]: m for m in mounts}
    for destination in sorted((theirs.keys() | mine.keys()) - allowed):
        if theirs.get(destination) != mine.get(destination):
            raise RuntimeCheckError(
                f"{spec.label}: its mount at {destination} is {_mount(mine.get(destination))}; {live.label} has "
                f"{_mount(theirs.get(destination))}; list {destination} in allowed_mount_differences if the "
                "difference is the experiment"
            )
    if not spec.allowed_image_difference and live.image_id is not None and image != live.image_id:
        raise RuntimeCheckError(
            f"{spec.label}: it runs image {(image or 'unknown')[:19]}, {live.label} runs {live.image_id[:19]}; set "
            "allowed_image_difference = true if the new build is the experiment"
        )


def _mount(found: dict[str, str] | None) -> str:
    return f"{found['source']} ({found['mode']})" if found is not None else "absent"
