"""Validity: conditions under which no verdict may be read from the numbers.

A comparison is only fair at the same clock: every start must have run at one clock
cap, on every host, that cap must be production's (each host's own configured cap where
each was read), and nothing may have dialled the clock back inside the window, in a
start or between starts (nor re-locked between them, nor acted on by a watchdog whose log the plan
names). Each fired condition is named, with its host. Power-cap
dial-backs are reported beside; they count as thermal ones only where the plan says so
(the window counts them into ``thermal_events`` then).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from fairwin.decision.inputs import WindowContext
from fairwin.decision.table import CellTable


class Validity(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    valid: bool
    conditions: list[str]
    clock_caps_mhz: dict[str, float | None]
    thermal_events: dict[str, int | None]
    observed: bool
    power_events: dict[str, int] = Field(default_factory=dict, description="Starts with power-cap dial-backs.")


def _host_conditions(
    table: CellTable, configured: Mapping[str, float | None] | None, production_cap_mhz: float | None
) -> list[str]:
    """Hosts of one start at different caps, and a host at another cap than its own configured one (or than
    production's), each named with the starts it happened in."""
    found: dict[str, list[str]] = {}
    for start in table.starts:
        row = next(iter(table.rows[start].values()), None)
        by_host = {h: c for h, c in (row.clock_caps_by_host or {}).items() if c is not None} if row else {}
        if len(set(by_host.values())) > 1:
            shown = ", ".join(f"{host} at {cap:g} MHz" for host, cap in sorted(by_host.items()))
            found.setdefault(f"hosts ran at different clock caps ({shown})", []).append(start)
        for host, cap in sorted(by_host.items()):
            own = (configured or {}).get(host)
            own = production_cap_mhz if own is None else own  # a node without its own file: production's
            # One host held to production's cap is the condition above already; name hosts where it adds one.
            if own is not None and cap != own and (len(by_host) > 1 or own != production_cap_mhz):
                found.setdefault(f"host {host} ran at {cap:g} MHz, its configured cap is {own:g} MHz", []).append(start)
    return [f"{condition} in {', '.join(starts)}" for condition, starts in found.items()]


def check_validity(table: CellTable, context: WindowContext) -> Validity:
    production_cap_mhz = context.production_clock_cap_mhz
    caps: dict[str, float | None] = {}
    thermal: dict[str, int | None] = {}
    power: dict[str, int] = {}
    for start in table.starts:
        rows = list(table.rows[start].values())
        start_caps = {row.clock_cap_mhz for row in rows}
        caps[start] = next(iter(start_caps)) if len(start_caps) == 1 else None
        events = [row.thermal_events for row in rows]
        thermal[start] = None if any(e is None for e in events) or not events else sum(e for e in events if e)
        if powered := sum(row.power_events or 0 for row in rows):
            power[start] = powered
    conditions: list[str] = []
    seen = {cap for cap in caps.values() if cap is not None}
    per_host = [row.clock_caps_by_host or {} for rows in table.rows.values() for row in rows.values()]
    observed = bool(seen) or any(c is not None for caps_of in per_host for c in caps_of.values())  # disagreeing too
    if observed and any(cap is None for cap in caps.values()):
        missing = [s for s, cap in caps.items() if cap is None]
        conditions.append(f"clock cap missing (or varying) in {', '.join(missing)}")
    if len(seen) > 1:
        conditions.append(f"starts ran at different clock caps: {caps}")
    if production_cap_mhz is not None:
        if not observed and "clocks" not in context.accepted_unobserved:  # accepted: decision.unobserved names it
            conditions.append(
                f"the plan declares a production clock cap of {production_cap_mhz:g} MHz "
                "but no start's cap was observed"
            )
        off = {s: cap for s, cap in caps.items() if cap is not None and cap != production_cap_mhz}
        if off:
            conditions.append(f"cap differs from production's {production_cap_mhz:g} MHz in {off}")
    configured = context.production_caps_by_host
    if configured and len({c for c in configured.values() if c is not None}) > 1:
        shown = ", ".join(f"{host} {cap:g} MHz" for host, cap in sorted(configured.items()) if cap is not None)
        conditions.append(f"production's configured clock cap differs between its hosts: {shown}")
    conditions += _host_conditions(table, configured, production_cap_mhz)
    dialled = {s: n for s, n in thermal.items() if n}
    if dialled:
        conditions.append(f"the clock was dialled back inside the window: {dialled} events")
    if context.between_starts_dialbacks:
        conditions.append(f"the clock was dialled back between starts: {context.between_starts_dialbacks} events")
    for gap, clocks in (context.between_starts_relocks or {}).items():
        conditions.append(f"the clock cap changed between starts, {gap}: {'; '.join(clocks)}")
    for host, lines in (context.watchdog_events or {}).items():
        conditions.append(f"the clock watchdog on {host} logged during the window: {' | '.join(lines)}")
    return Validity(
        valid=not conditions,
        conditions=conditions,
        clock_caps_mhz=caps,
        thermal_events=thermal,
        observed=observed,
        power_events=power,
    )
