"""What a window's receipts say it saw, and what it could not see: each start's GPUs, the checks that observed
nothing (and why the window went on without them), and what the host was doing around the starts. The decision
step puts these into the decision's context; summary.md and report.html show them."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from fairwin.directory.start_receipt import StartReceipt, StartTelemetry
from fairwin.production.live import LiveProduction
from fairwin.telemetry.host_condition import not_idle_warning


def pooled_profile(receipts: Sequence[StartReceipt]) -> str | None:
    """The server profile the window's starts pooled with (they all match: metrics/profile.py); None before any
    start read its server's /metrics."""
    return next((r.counters for r in receipts if r.counters is not None), None)


def started_telemetry(receipts: Sequence[StartReceipt]) -> list[tuple[str, StartTelemetry]]:
    """Each start's GPU summary, from its start.json, in start order (none where nothing was sampled)."""
    return [(r.start, r.telemetry) for r in receipts if r.telemetry is not None]


def unobserved_checks(receipts: Sequence[StartReceipt]) -> list[str]:
    """The checks the plan accepted without their input, from the starts' receipts."""
    starts = [r.start for r in receipts if r.speculative_source == "unobserved"]
    if not starts:
        return []
    return [
        f"speculative config (no server report, no argv) in {', '.join(starts)}: its checks compared nothing; "
        "accepted by runtime.accept_unobserved"
    ]


def clocks_unobserved(accepted: Collection[str], hosts: Sequence[str]) -> list[str]:
    """The clocks nothing observed, named, with why the window went on without them. ``accepted``: the plan's
    ``runtime.accept_unobserved``."""
    if not hosts:
        return []
    why = (
        "accepted by runtime.accept_unobserved"
        if "clocks" in accepted
        else "a plan that declares no production clock cap"
    )
    return [f"clocks ({'; '.join(hosts)}): {why}"]


def gpus_unobserved(accepted: Collection[str], hosts: Sequence[str]) -> list[str]:
    """A GPU plan's hosts whose GPUs the quiet proof could not read, accepted by the plan (else it was refused at
    admission); a CPU plan's are not named (its quiet proof reads its ports and processes, and says so)."""
    if not hosts or "gpus" not in accepted:
        return []
    return [f"GPUs ({'; '.join(hosts)}): the quiet proof read none there; accepted by runtime.accept_unobserved"]


def production_unobserved(live: LiveProduction | None, compared: Sequence[str]) -> list[str]:
    """Production's processes whose speculative config was read nowhere, where roles were compared with it (the
    plan accepted it: else the window was refused before the take-down)."""
    unread = [m.label for m in (live.members if live is not None else ()) if m.speculative_source == "unobserved"]
    if not unread or not compared:
        return []
    return [
        f"speculative config of {', '.join(unread)} (no server log line, no argv): role(s) {', '.join(compared)} "
        "compared with it compared nothing; accepted by runtime.accept_unobserved"
    ]


def host_findings(receipts: Sequence[StartReceipt]) -> list[str]:
    """What the host was doing around the starts, from their receipts: each start it was not idle before."""
    return [
        found
        for r in receipts
        if r.host_before is not None and (found := not_idle_warning(r.start, r.host_before)) is not None
    ]
