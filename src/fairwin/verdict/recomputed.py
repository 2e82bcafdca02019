"""A stored decision against its recomputation: identical, identical but for float rounding, or different.

A window decided under an earlier format is compared as that format wrote it: ``/2`` rounded an
interval's level to a whole percent, and ``/2`` and ``/3`` had no ``arms``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from fairwin.decision import Decision

ROUNDING = 1e-9


def rounding_difference(before: Any, now: Any) -> float | None:
    """The largest relative difference between two JSON trees equal but for float rounding; None when they
    differ in anything else (a key, a string, a verdict, a number beyond :data:`ROUNDING`)."""
    if isinstance(before, dict) and isinstance(now, dict):
        if before.keys() != now.keys():
            return None
        found = [rounding_difference(before[k], now[k]) for k in before]
    elif isinstance(before, list) and isinstance(now, list):
        if len(before) != len(now):
            return None
        found = [rounding_difference(a, b) for a, b in zip(before, now, strict=True)]
    elif isinstance(before, float) and isinstance(now, float) and before != now:
        scale = max(abs(before), abs(now))
        relative = abs(before - now) / scale
        return relative if math.isfinite(relative) and relative < ROUNDING else None
    else:
        return 0.0 if before == now else None
    return None if None in found else max(found, default=0.0)  # type: ignore[type-var]


#: Where a reason states an interval's level: an estimate's ``(method, 95%, df 6)``, a guard's ``(99.8%); fails``.
_LEVELS = re.compile(r"(?<=, )(\d+(?:\.\d+)?)%(?=, df )|(?<=\()(\d+(?:\.\d+)?)%(?=\); fails )")


def _worded_as_2(tree: Any) -> Any:
    """A recomputed decision's JSON worded as ``fairwin.decision/2`` wrote it: each level rounded to a whole
    percent, so that a window decided before ``/3`` compares with its own record."""
    if isinstance(tree, dict):
        return {k: ("fairwin.decision/2" if k == "format" else _worded_as_2(v)) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_worded_as_2(v) for v in tree]
    if isinstance(tree, str):
        return _LEVELS.sub(lambda m: f"{float(m.group(1) or m.group(2)) / 100:.0%}", tree)
    return tree


def compared(recorded: Decision, recomputed: Decision) -> str:
    """A recomputation against its record, in one line: identical, identical but for float rounding, or DIFFERS."""
    before = recorded.model_dump(mode="json", exclude={"inputs"})
    now = recomputed.model_dump(mode="json", exclude={"inputs"})
    if recorded.format != now["format"] and now.get("arms") is None:
        # Written before /4, which added a many-arm window's ``arms``: a two-arm decision is otherwise the same.
        now = {k: (recorded.format if k == "format" else v) for k, v in now.items() if k != "arms"}
        before.pop("arms", None)
    if recorded.format == "fairwin.decision/2":
        now = _worded_as_2(now)
    difference = rounding_difference(before, now)
    if difference == 0.0:
        return f"recomputed: identical to the recorded decision ({recorded.verdict})"
    if difference is not None:
        return (
            f"recomputed: identical to the recorded decision ({recorded.verdict}) but for float rounding (largest "
            f"relative difference {difference:.1e}: this machine's linear algebra rounds differently)"
        )
    return (
        f"recomputed: DIFFERS from the recorded decision (recorded {recorded.verdict}, now {recomputed.verdict}); "
        "the inputs are the sealed ones, so the deciding code changed"
    )
