"""The GPUs a window reads: the source here (NVML or nvidia-smi), and those of every host the window touches.

Between starts nothing may compute on the hardware under test. That hardware is
production's host and every host the mode's roles (and their workers) run on, not only
the machine fairwin runs on: each remote host is read through its nvidia-smi over SSH.
"""

from __future__ import annotations

import shutil

from fairwin.errors import InputError
from fairwin.plan.models import Plan
from fairwin.plan.site import Site
from fairwin.telemetry.gpu import HERE, GpuSource, NvidiaSmi, PerHost, remote_source


def window_gpus(sources: dict[str, GpuSource | None]) -> GpuSource | None:
    """The GPUs a window watches, from each host's source (:func:`host_sources`): the one here alone when every
    process runs on fairwin's host (as before hosts existed), else every host's that has one."""
    if set(sources) <= {HERE}:
        return sources.get(HERE)
    found = {host: source for host, source in sources.items() if source is not None}
    return PerHost(found) if found else None


def find_source(setting: str) -> GpuSource | None:
    """The source a plan asks for: 'nvml', 'nvidia-smi', 'none', or 'auto' (NVML, else nvidia-smi, else none)."""
    if setting == "none":
        return None
    if setting in ("auto", "nvml"):
        from fairwin.telemetry.nvml import Nvml, nvml_available

        if nvml_available():
            return Nvml()
        if setting == "nvml":
            raise InputError("telemetry.gpu = 'nvml', but NVML cannot be loaded here (no NVIDIA driver?)")
    if shutil.which("nvidia-smi") is not None:
        return NvidiaSmi()
    if setting == "nvidia-smi":
        raise InputError("telemetry.gpu = 'nvidia-smi', but nvidia-smi is not on PATH")
    return None


def host_sources(site: Site, here: GpuSource | None) -> dict[str, GpuSource | None]:
    """Each host the site touches ('here' for fairwin's own) and its GPU source, None where it has none.
    Blocking: a remote host's nvidia-smi is asked over SSH."""
    gpu = site.plan.telemetry.gpu
    return {
        host or HERE: here if host is None else remote_source(host, site.places[host], gpu) for host in site.touched
    }


def unread_gpus(sources: dict[str, GpuSource | None]) -> list[str]:
    """The hosts whose GPUs nothing can read: the quiet proof cannot see what computes on them."""
    return [host for host, source in sources.items() if source is None]


def unwatched_clocks(plan: Plan, sources: dict[str, GpuSource | None]) -> list[str]:
    """Each host the window touches whose clock cap or dial-backs nothing observes, and why: the cap needs a GPU
    source (cap_from 'locked' or 'applications') or the servers' logs ('log'); dial-backs need a GPU source or
    the host's watchdog log. ``sources``: :func:`host_sources`."""
    settings = plan.telemetry
    unseen: list[str] = []
    for name, source in sources.items():
        missing = []
        if settings.cap_from == "none":
            missing.append("its clock cap (telemetry.cap_from = 'none')")
        elif source is None and settings.cap_from != "log":
            missing.append("its clock cap")
        if source is None and name not in settings.watchdog_logs:
            missing.append("its dial-backs (no watchdog log)")
        if missing:
            why = (
                ""
                if source is not None
                else ("; telemetry.gpu = 'none'" if settings.gpu == "none" else "; neither NVML nor nvidia-smi found")
            )
            unseen.append(f"{name}: {' and '.join(missing)} unseen{why}")
    return unseen


def declares_clocks(plan: Plan) -> bool:
    """A GPU plan: one that declares production's clock cap (or a file holding it), or names a GPU source."""
    return (
        plan.window.production_clock_cap_mhz is not None
        or plan.telemetry.production_cap_file is not None
        or plan.telemetry.gpu in ("nvml", "nvidia-smi")
    )
