"""Production's configured clock cap: read from the host's environment file where the plan names one.

A team that locks its GPUs' clocks usually keeps the number where its launch scripts
read it (``GPU_CLOCK_CAP=1755`` in ``/etc/environment``). The window reads it once, at
open, and every start's observed cap is compared with it; without the file, the plan's
``window.production_clock_cap_mhz`` is the cap (or none).
"""

from __future__ import annotations

from dotenv import dotenv_values

from fairwin.errors import InputError
from fairwin.plan.loading import LoadedPlan


def production_cap(loaded: LoadedPlan) -> tuple[float | None, str]:
    """(cap in MHz or None, where it came from)."""
    settings, declared = loaded.plan.telemetry, loaded.plan.window.production_clock_cap_mhz
    if settings.production_cap_file is None:
        return declared, "window.production_clock_cap_mhz" if declared is not None else "none declared"
    path = loaded.resolve(settings.production_cap_file)
    if not path.is_file():
        if declared is not None:
            return declared, f"window.production_clock_cap_mhz ({path} is absent)"
        raise InputError(f"telemetry.production_cap_file {path} does not exist; create it or remove the key")
    value = dotenv_values(path).get(settings.production_cap_key)
    if value is None:
        if declared is not None:
            return declared, f"window.production_clock_cap_mhz ({path} has no {settings.production_cap_key})"
        raise InputError(f"{path} has no {settings.production_cap_key}=MHz; add it or set production_clock_cap_mhz")
    try:
        return float(value), f"{path}: {settings.production_cap_key}"
    except ValueError:
        raise InputError(f"{path}: {settings.production_cap_key}={value!r} is not a number of MHz") from None
