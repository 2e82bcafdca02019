"""The order of a window's starts: their names and kinds, shared by the schedule and the decision.

Control and candidate take turns, beginning with the kind the order names: a bracket
(three starts) is control, candidate, control or candidate, control, candidate; a
rule may register more starts, which alternate the same way.
"""

from __future__ import annotations

from typing import Literal

Kind = Literal["control", "candidate"]
Order = Literal["control-first", "candidate-first"]
ORDER_NAMES: tuple[Order, ...] = ("control-first", "candidate-first")
#: Starts in a window unless its rule registers more.
BRACKET_STARTS = 3


def start_names(count: int) -> tuple[str, ...]:
    return tuple(f"s{i}" for i in range(1, count + 1))


def order_kinds(order: str, count: int = BRACKET_STARTS) -> dict[str, Kind]:
    """Each start's kind, in run order: they alternate, the first one named by ``order``."""
    first: Kind = "control" if order == "control-first" else "candidate"
    second: Kind = "candidate" if first == "control" else "control"
    return {name: (first if i % 2 == 0 else second) for i, name in enumerate(start_names(count))}
