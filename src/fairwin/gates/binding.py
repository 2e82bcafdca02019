"""What a receipt vouches for, bound field by field, so that a change elsewhere leaves it valid.

A receipt bound to the whole plan's sha256 falls to any edit: a worker's new commit, passed
per launch, would force a new rehearsal against production although nothing the rehearsal
tried has changed. A binding is instead each leaf of the parts of the effective plan the
receipt vouches for (a dotted path -> the sha256 of its canonical JSON). A check compares
the leaves and names every field that moved, or appeared, or went.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from fairwin.files import canonical_json, sha256_bytes
from fairwin.plan.loading import LoadedPlan

#: The window settings a rehearsal's probes are built from (seeds, the warm-up's length, the counters read).
_PROBED_WINDOW_KEYS = ("base_seed", "warmup_max_tokens", "counters", "request_timeout_s")


def _leaves(prefix: str, value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping) and value:
        for key, inner in value.items():
            yield from _leaves(f"{prefix}.{key}", inner)
    else:
        yield prefix, value  # a list (an argv) is one field: its items mean something only together


def bind(parts: Mapping[str, Any]) -> dict[str, str]:
    """Each leaf under these named parts -> the sha256 of its value's canonical JSON."""
    return {
        path: sha256_bytes(canonical_json(value).encode("utf-8"))
        for name, part in parts.items()
        for path, value in _leaves(name, part)
    }


def moved(bound: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """The fields whose value differs between a binding and the plan's binding now, sorted."""
    return sorted(path for path in bound.keys() | now.keys() if bound.get(path) != now.get(path))


def rehearsal_parts(loaded: LoadedPlan) -> dict[str, Any]:
    """What a rehearsal vouches for: production's declaration (and its role's), the rehearsal's settings,
    and what its probes are built from (cells, families and their pins, diagnostics, probed window keys)."""
    plan = loaded.plan.model_dump(mode="json")
    production = plan.get("production")
    parts: dict[str, Any] = {"production": production, "rehearsal": plan["rehearsal"]}
    if production and production.get("role"):
        parts[f"roles.{production['role']}"] = plan["roles"][production["role"]]
    parts["cells"] = plan["cells"]
    parts["families"] = {
        name: {**plan["families"][name], "prompts_sha256": fam.prompts_sha256, "order_sha256": fam.order_sha256}
        for name, fam in loaded.families.items()
    }
    parts["diagnostics"] = plan["diagnostics"]
    parts["window"] = {key: plan["window"][key] for key in _PROBED_WINDOW_KEYS}
    return parts
