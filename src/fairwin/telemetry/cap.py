"""Production's configured clock cap: read from its host's environment file where the plan names one.

A team that locks its GPUs' clocks usually keeps the number where its launch scripts
read it (``GPU_CLOCK_CAP=1755`` in ``/etc/environment``). The window reads it once, at
open, from the host production runs on (over SSH when that is a ``[hosts.NAME]``), and
every start's observed cap is compared with it; without the file, the plan's
``window.production_clock_cap_mhz`` is the cap (or none).
"""

from __future__ import annotations

import io
import shlex

from dotenv import dotenv_values

from fairwin.errors import InputError, LaunchError
from fairwin.plan.loading import LoadedPlan


def production_host(loaded: LoadedPlan) -> str | None:
    """The [hosts.NAME] production runs on (its role's host, or where it is managed); None: here."""
    settings = loaded.plan.production
    if settings is None:
        return None
    return loaded.plan.roles[settings.role].host if settings.role is not None else settings.host


def production_cap(loaded: LoadedPlan) -> tuple[float | None, str]:
    """(cap in MHz or None, where it came from)."""
    settings, declared = loaded.plan.telemetry, loaded.plan.window.production_clock_cap_mhz
    if settings.production_cap_file is None:
        return declared, "window.production_clock_cap_mhz" if declared is not None else "none declared"
    host = production_host(loaded)
    if host is None:
        local = loaded.resolve(settings.production_cap_file)
        path = where = str(local)
        text = local.read_text() if local.is_file() else None
    else:
        path = str(settings.production_cap_file)
        text = _remote_text(loaded, host, path)
        where = f"{path} on host {host}"
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


def _remote_text(loaded: LoadedPlan, name: str, path: str) -> str | None:
    """The file's text on the host, None when it is absent (read alike inside the window's loop or outside)."""
    from fairwin.launch.ssh import blocking, resolved, run_once  # asyncssh only where a host is used

    host = resolved(loaded.plan.hosts[name], loaded.base_dir)

    async def read() -> str | None:
        done = await run_once(name, host, f"cat -- {shlex.quote(path)}", 30.0)
        return str(done.stdout or "") if done.exit_status == 0 else None

    try:
        return blocking(read())
    except LaunchError as exc:
        raise InputError(f"production's cap file could not be read: {exc}") from None
