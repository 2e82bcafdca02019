"""Closing a window: decide from the stored rows, and report.

The decision's inputs besides the rows (which cells decide, the production clock
cap, the order, the archive's noise in the snapshot read at open, before this window
was added, with that snapshot's row count and digest) are written to ``context.json``, so
``fairwin decide WINDOW`` reproduces the decision exactly from the directory alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fairwin.archive import Snapshot
from fairwin.decision import (
    ArchiveNoise,
    ArchiveSnapshot,
    Decision,
    DecisionRow,
    RuleSpec,
    SealedInputs,
    WindowContext,
    decide,
)
from fairwin.files import read_json, read_jsonl, sha256_file, write_json_atomic, write_text_atomic
from fairwin.formats import CONTEXT, POOLED, START
from fairwin.plan.loading import LoadedPlan
from fairwin.report.html import write_report
from fairwin.report.markdown import render_summary
from fairwin.window.archiving import control_rows, window_noise
from fairwin.window.diagnostics import findings
from fairwin.window.layout import WindowDir


def decision_rows(pooled: Sequence[dict[str, Any]]) -> list[DecisionRow]:
    return [DecisionRow.model_validate(row) for row in pooled]


def context_for(
    loaded: LoadedPlan, window: WindowDir, mode: str, order: str, archive: list[ArchiveNoise],
    production_cap_mhz: float | None, snapshot: Snapshot,
) -> WindowContext:  # fmt: skip
    return WindowContext(
        window_id=window.window_id,
        mode=mode,
        cells=list(loaded.plan.cells),
        reported=[name for name, cell in loaded.plan.cells.items() if not cell.decision],
        production_clock_cap_mhz=production_cap_mhz,
        order="candidate-first" if order == "candidate-first" else "control-first",
        archive=archive,
        archive_snapshot=ArchiveSnapshot(rows=snapshot.count, sha256=snapshot.digest),
        greedy=findings(window.path, greedy, loaded.base_dir) if (greedy := loaded.plan.diagnostics.greedy) else None,
    )


def window_context(
    loaded: LoadedPlan, window: WindowDir, *, mode: str, order: str, rule: RuleSpec, snapshot: Snapshot,
    planned: dict[str, dict[str, Any]], production_cap_mhz: float | None,
) -> WindowContext:  # fmt: skip
    """The context a window's rows are decided in: the archive's noise keyed as its own control starts (as
    ``planned`` where none of a cell finished). The decide step and a sequential rule's looks both read it."""
    noise = window_noise(snapshot, control_rows(window.path), planned, rule)
    return context_for(loaded, window, mode, order, noise, production_cap_mhz, snapshot)


def started_telemetry(window: WindowDir) -> list[dict[str, Any]]:
    """Each start's GPU summary, from its start.json, in start order (none where nothing was sampled)."""
    found = []
    for path in sorted((window.path / "starts").glob("*/start.json"), key=lambda p: int(p.parent.name[1:])):
        telemetry = read_json(path, START.readable).get("telemetry")
        if isinstance(telemetry, dict):
            found.append({"start": path.parent.name, **telemetry})
    return found


def seal(window: WindowDir) -> SealedInputs:
    """The digests of the files the decision reads, so a later edit of either is seen, not decided."""
    return SealedInputs(
        pooled_sha256=sha256_file(window.pooled),
        context_sha256=sha256_file(window.context),
        manifest_sha256=sha256_file(window.manifest),
    )


def decide_and_report(
    loaded: LoadedPlan,
    window: WindowDir,
    *,
    mode: str,
    order: str,
    rule: RuleSpec,
    snapshot: Snapshot,
    planned: dict[str, dict[str, Any]],
    production_cap_mhz: float | None,
    held: Sequence[str] = (),
    stop_reason: str | None = None,
    between_starts: dict[str, int] | None = None,
    production_caps_by_host: dict[str, float | None] | None = None,
) -> Decision:
    """``planned``: each cell's archive key as known at open, for a cell none of whose control starts finished;
    ``stop_reason``: why a sequential window stopped before a look settled it; ``between_starts``: dial-backs
    while production was down but no start ran (window/clocks.py); ``production_caps_by_host``: each host's own
    configured cap."""
    pooled = read_jsonl(window.pooled, POOLED.readable)
    context = window_context(loaded, window, mode=mode, order=order, rule=rule, snapshot=snapshot, planned=planned,
                             production_cap_mhz=production_cap_mhz)  # fmt: skip
    context = context.model_copy(update={
        "stop_reason": stop_reason, "between_starts_dialbacks": between_starts or None,
        "production_caps_by_host": production_caps_by_host or None,
    })  # fmt: skip
    write_json_atomic(window.context, {"format": CONTEXT.id, **context.model_dump(mode="json")})
    decision = decide(decision_rows(pooled), rule=rule, context=context).model_copy(update={"inputs": seal(window)})
    write_json_atomic(window.decision, decision)
    summary = render_summary(loaded.path, loaded.sha256, decision, pooled, held, started_telemetry(window))
    write_text_atomic(window.summary, summary)
    return decision


def report_after_close(window: WindowDir, decision: Decision, say: Callable[[str], None]) -> None:
    """report.html, once the status and the journal are final (its receipts show them). The window's result is
    already whole on disk: a report that cannot be drawn is a warning with the command that redraws it."""
    try:
        write_report(window.path, decision)
    except Exception as exc:
        say(f"warning: report.html could not be written ({type(exc).__name__}: {exc}); "
            f"run `fairwin report {window.path}` to try again")  # fmt: skip
