"""Production's configured clock cap: read from its host's environment file where the plan names one.

A team that locks its GPUs' clocks usually keeps the number where its launch scripts
read it (``GPU_CLOCK_CAP=1755`` in ``/etc/environment``), on every node. The window
reads it once, at open, from the host production runs on (over SSH when that is a
``[hosts.NAME]``), and every start's observed cap is compared with it; without the
file, the plan's ``window.production_clock_cap_mhz`` is the cap (or none). It also
reads each other host the window touches from that host's own file: a node configured
at another cap is named, and each host's observed cap is held to its own.
"""

from __future__ import annotations

import io
import shlex

from dotenv import dotenv_values

from fairwin.errors import InputError, LaunchError, SchedulerError
from fairwin.launch.scheduler import on_node
from fairwin.plan.site import Site
from fairwin.telemetry.gpu import HERE


def _cap_text(site: Site, host: str | None) -> tuple[str | None, str]:
    """The cap file's text on the host (None when absent) and how to name it."""
    settings = site.plan.telemetry
    assert settings.production_cap_file is not None
    if host is None:
        local = site.resolve(settings.production_cap_file)
        return (local.read_text() if local.is_file() else None), str(local)
    path = str(settings.production_cap_file)
    return _remote_text(site, host, path), f"{path} on host {host}"


def production_caps(site: Site) -> dict[str, float | None]:
    """The configured cap each host the site touches holds in its own file (None where it has none), by host
    ('here' for fairwin's own); {} without ``production_cap_file``."""
    settings = site.plan.telemetry
    if settings.production_cap_file is None:
        return {}
    found: dict[str, float | None] = {}
    for host in site.touched:
        text, where = _cap_text(site, host)
        value = dotenv_values(stream=io.StringIO(text)).get(settings.production_cap_key) if text is not None else None
        try:
            found[host or HERE] = float(value) if value is not None else None
        except ValueError:
            raise InputError(f"{where}: {settings.production_cap_key}={value!r} is not a number of MHz") from None
    return found


def production_cap(site: Site) -> tuple[float | None, str]:
    """(cap in MHz or None, where it came from)."""
    settings, declared = site.plan.telemetry, site.plan.window.production_clock_cap_mhz
    if settings.production_cap_file is None:
        return declared, "window.production_clock_cap_mhz" if declared is not None else "none declared"
    text, where = _cap_text(site, site.production_host)
    if text is None:
        if declared is not None:
            return declared, f"window.production_clock_cap_mhz ({where} is absent)"
        raise InputError(f"telemetry.production_cap_file {where} does not exist; create it or remove the key")
    value = dotenv_values(stream=io.StringIO(text)).get(settings.production_cap_key)
    if value is None:
        if declared is not None:
            return declared, f"window.production_clock_cap_mhz ({where} has no {settings.production_cap_key})"
        raise InputError(f"{where} has no {settings.production_cap_key}=MHz; add it or set production_clock_cap_mhz")
    try:
        return float(value), f"{where}: {settings.production_cap_key}"
    except ValueError:
        raise InputError(f"{where}: {settings.production_cap_key}={value!r} is not a number of MHz") from None


def planned_cap(site: Site) -> float | None:
    """Production's cap as far as it is known without contacting a host (the gates, ``plan show``): its file where
    production runs here, else ``window.production_clock_cap_mhz``. A window reads the real one once its hosts
    answered (:func:`production_cap`) and counts its archive again with it."""
    declared = site.plan.window.production_clock_cap_mhz
    if site.plan.telemetry.production_cap_file is None or site.production_host is not None:
        return declared
    try:
        return production_cap(site)[0]
    except InputError:
        return declared  # refused with its reason when the window reads it


#: What a node answers for a cap file it does not have (a line no environment file holds).
ABSENT = "fairwin:no-such-file"


def _remote_text(site: Site, name: str, path: str) -> str | None:
    """The file's text on the host, None when it is absent (read alike inside the window's loop or outside); on a
    node of the window's Slurm job, read there through srun."""
    if (node := site.nodes.get(name)) is not None:
        quoted = shlex.quote(path)
        try:
            said = on_node(
                node.job_id,
                node.node,
                ["sh", "-c", f"if [ -e {quoted} ]; then cat -- {quoted}; else echo {ABSENT}; fi"],
            )
            return None if said.strip() == ABSENT else said
        except SchedulerError as exc:
            raise InputError(f"production's cap file could not be read on node {node.node}: {exc}") from None
    from fairwin.launch.ssh import blocking, run_once  # asyncssh only where a host is used

    host = site.host(name)

    async def read() -> str | None:
        done = await run_once(name, host, f"cat -- {shlex.quote(path)}", 30.0, retry="read")
        return str(done.stdout or "") if done.exit_status == 0 else None

    try:
        return blocking(read())
    except LaunchError as exc:
        raise InputError(f"production's cap file could not be read: {exc}") from None
