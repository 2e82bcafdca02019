"""The server profile a start pools with, read from what its server's /metrics exports.

A plan names a profile (``window.counters``) or asks for ``auto``. Either way the first healthy start's
``/metrics`` is read: a named profile the server does not export is refused there, naming both, before a
single wave; ``auto`` takes the one it finds (client-only where none is there). Every later start must
export the same one: a window never pools one role with vLLM's counters and the other with llama.cpp's.
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp

from fairwin.errors import MetricsError, RuntimeCheckError
from fairwin.metrics.scrape import read_exposition
from fairwin.profiles import CLIENT_ONLY, PROFILES, CountersSetting, ServerProfile, detect, exported


@dataclass(frozen=True)
class ChosenProfile:
    """The profile a start pools with and why: the receipt's ``counters`` and ``counters_reason``."""

    profile: ServerProfile
    reason: str


async def choose_profile(
    session: aiohttp.ClientSession,
    base_url: str,
    setting: CountersSetting,
    earlier: ServerProfile | None,
    where: str,
) -> ChosenProfile:
    """The profile for the server at ``base_url`` (``where`` names it in errors); ``earlier`` is the one an
    earlier start of the window pooled with, which this one must match."""
    if setting == "none":
        return ChosenProfile(CLIENT_ONLY, 'window.counters = "none": the server\'s counters are not read')
    unread: str | None = None
    try:
        series = set((await read_exposition(session, base_url, prefix="")).series)
    except MetricsError as exc:
        if setting != "auto":
            raise
        series, unread = set(), str(exc)
    if setting == "auto":
        chosen = detect(series)
        reason = (
            f"auto: {base_url}/metrics exports {chosen.signature}"
            if chosen.reads_counters
            else f"auto: {unread or f'{base_url}/metrics exports no counters of a profile fairwin knows'}"
        )
    else:
        chosen = PROFILES[setting]
        if chosen.signature not in series:
            found = exported(series)
            names = ", ".join(p.name for p in found)
            exports = f"exports {names}'s counters" if found else "exports none of a profile fairwin knows"
            raise RuntimeCheckError(
                f'{where}: window.counters = "{setting}", but {base_url}/metrics has no {chosen.signature}: it '
                f'{exports}; name the server\'s profile, or set window.counters = "auto"'
            )
        reason = f"named by the plan; {base_url}/metrics exports {chosen.signature}"
    if earlier is not None and chosen.name != earlier.name:
        raise RuntimeCheckError(
            f"{where}: its server's counters are {chosen.name}'s, but the window pools {earlier.name}'s (chosen "
            "at its first start); a window pools one engine's counters (to compare two engines, measure client-only: "
            'window.counters = "none")'
        )
    return ChosenProfile(chosen, reason)
