"""Validity: conditions under which no verdict may be read from the numbers.

A comparison is only fair at the same clock: every start must have run at one clock
cap, that cap must be production's when the plan declares one, and nothing may have
dialled the clock back inside the window. Each fired condition is named.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from fairwin.decision.table import CellTable


class Validity(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    valid: bool
    conditions: list[str]
    clock_caps_mhz: dict[str, float | None]
    thermal_events: dict[str, int | None]
    observed: bool


def check_validity(table: CellTable, production_cap_mhz: float | None) -> Validity:
    caps: dict[str, float | None] = {}
    thermal: dict[str, int | None] = {}
    for start in table.starts:
        rows = list(table.rows[start].values())
        start_caps = {row.clock_cap_mhz for row in rows}
        caps[start] = next(iter(start_caps)) if len(start_caps) == 1 else None
        events = [row.thermal_events for row in rows]
        thermal[start] = None if any(e is None for e in events) or not events else sum(e for e in events if e)
    conditions: list[str] = []
    seen = {cap for cap in caps.values() if cap is not None}
    observed = bool(seen)
    if observed and any(cap is None for cap in caps.values()):
        missing = [s for s, cap in caps.items() if cap is None]
        conditions.append(f"clock cap missing (or varying) in {', '.join(missing)}")
    if len(seen) > 1:
        conditions.append(f"starts ran at different clock caps: {caps}")
    if production_cap_mhz is not None:
        if not observed:
            conditions.append(
                f"the plan declares a production clock cap of {production_cap_mhz:g} MHz "
                "but no start's cap was observed"
            )
        off = {s: cap for s, cap in caps.items() if cap is not None and cap != production_cap_mhz}
        if off:
            conditions.append(f"cap differs from production's {production_cap_mhz:g} MHz in {off}")
    dialled = {s: n for s, n in thermal.items() if n}
    if dialled:
        conditions.append(f"the clock was dialled back inside the window: {dialled} events")
    return Validity(
        valid=not conditions, conditions=conditions, clock_caps_mhz=caps, thermal_events=thermal, observed=observed
    )
