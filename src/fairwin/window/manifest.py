"""window.json, the window's manifest: written at open, before anything is measured."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fairwin.archive.window_rows import archive_key_record
from fairwin.formats import WINDOW

if TYPE_CHECKING:
    from fairwin.window.machine import Window


def manifest(window: Window) -> dict[str, Any]:
    """window.json: what is about to run, and under which rule, gates, production and telemetry."""
    mode, rule = window.checked.mode, window.checked.rule
    return {
        "format": WINDOW.id,
        "window_id": window.directory.window_id,
        "mode": window.checked.mode_name,
        "control_role": mode.control,
        "candidate_role": mode.candidate,
        "order": window.order,
        "starts": [{"start": s.name, "kind": s.kind, "role": s.role} for s in window.starts],
        "plan_path": str(window.loaded.path),
        "plan_sha256": window.loaded.sha256,
        "rule_id": rule.id,
        "rule_sha256": rule.sha256,
        "archive": window.archive_store.location,  # never a password: the store redacts it
        "archive_key": archive_key_record(window.loaded),
        "archive_snapshot": window.archive_snapshot.record(),
        "power_warnings": window.power_warnings,
        "gates": window.gate_summary,
        "coordinator": window.directory.coordinator,
        "families": {
            name: {"prompts_sha256": fam.prompts_sha256, "order_sha256": fam.order_sha256}
            for name, fam in window.loaded.families.items()
        },
        "environment": window.environment,
        "production": window.hold.snapshot if window.hold is not None else None,
        "chain": window.chain.record() | {"last": window.chain.last} if window.chain is not None else None,
        "telemetry": {
            "gpu": window.gpu.name if window.gpu is not None else None,
            "production_cap_mhz": window.production_cap[0],
            "production_cap_from": window.production_cap[1],
            "production_caps_by_host": window.production_caps,
        },
    }
