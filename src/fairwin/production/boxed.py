"""A production role that is a container: brought up, found and taken down through its runtime, never by a pid.

fairwin runs it detached as ``fairwin-production-ROLE`` (``run -d``, like any container
it starts, on the host's network), labelled ``fairwin.production=ROLE``, so it outlives
fairwin and is found again by name; it is taken down with ``stop -t GRACE``, ``kill`` if
it still runs, then ``rm -f``.
"""

from __future__ import annotations

import math

from fairwin.errors import LaunchError, ProductionError
from fairwin.launch.container import KILLED, run_args
from fairwin.launch.inspect import Inspected, parse_inspect
from fairwin.launch.runtime_cli import RuntimeCli
from fairwin.launch.spec import LaunchSpec

PRODUCTION_LABEL = "fairwin.production"


def production_spec(spec: LaunchSpec) -> LaunchSpec:
    """The production role's spec named and labelled as production (not as any window's start)."""
    from dataclasses import replace

    return replace(spec, run_name=f"fairwin-production-{spec.role_name}", labels={PRODUCTION_LABEL: spec.role_name})


def cli_of(spec: LaunchSpec) -> RuntimeCli:
    assert spec.container is not None
    return RuntimeCli.of(spec.container, spec.host, spec.over_ssh())


async def found(spec: LaunchSpec) -> Inspected | None:
    """The production container as its runtime reports it; None when there is none by its name."""
    name = str(spec.container_name)
    try:
        code, out, _ = await cli_of(spec).run("inspect", "--type", "container", name)
    except LaunchError as exc:
        raise ProductionError(f"production's container {name}: {exc}") from None
    return parse_inspect(out, name) if code == 0 else None


async def running_pid(spec: LaunchSpec) -> int | None:
    """Its main process while it runs; None when it is absent or stopped."""
    box = await found(spec)
    return box.pid if box is not None and box.status == "running" else None


async def launch(spec: LaunchSpec) -> Inspected:
    """``run -d`` it (a stopped one of the same name is removed first); what inspect then says."""
    cli, name = cli_of(spec), str(spec.container_name)
    await cli.run("rm", "-f", name)
    code, _, err = await cli.run(*run_args(spec))
    if code != 0:
        tail = err.strip().splitlines()[-1:] or ["no output"]
        raise ProductionError(f"production's container {name} could not be started{cli.where}: {tail[0][-300:]}")
    box = await found(spec)
    if box is None:
        raise ProductionError(f"production's container {name}{cli.where} vanished right after `run`")
    return box


async def take_down(spec: LaunchSpec) -> str:
    """Stop and remove it: how ("stopped container NAME (SIGTERM)"), or "already down"."""
    cli, name = cli_of(spec), str(spec.container_name)
    box = await found(spec)
    if box is None:
        return "already down"
    sent = "none"
    if box.status == "running":
        grace = max(1, math.ceil(spec.stop_timeout_s))
        await cli.run("stop", "-t", str(grace), name, timeout_s=grace + 60.0)
        after = await found(spec)
        if after is not None and after.status == "running":
            await cli.run("kill", name)
        sent = "SIGKILL" if after is None or after.status == "running" or after.exit_code == KILLED else "SIGTERM"
    code, _, err = await cli.run("rm", "-f", name)
    if code != 0:
        raise ProductionError(f"production's container {name}{cli.where} was not removed: {err.strip()[-200:]}")
    return f"stopped container {name}{cli.where} ({sent})"


async def log_tail(spec: LaunchSpec) -> str:
    """The last line it logged, for a production that exited while coming up."""
    code, out, err = await cli_of(spec).run("logs", "--tail", "5", str(spec.container_name))
    lines = [line for line in (out + err).splitlines() if line.strip()]
    return lines[-1][-300:] if code == 0 and lines else "no log"
