"""A window's decision, written at its close and verified when it is read again.

At the close, the decision's inputs besides the rows (which cells decide, the production
clock cap, the order, the archive's noise in the snapshot read at open, before this window
was added, with that snapshot's row count and digest) are written to ``context.json``, so
``fairwin decide WINDOW`` (:func:`decide_window`, here too) reproduces the decision exactly
from the directory alone: it checks every input against the digest sealed for it, decides
again, and says whether the recomputation is the recorded decision.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fairwin.archive import Snapshot, read_archive
from fairwin.archive.archive_row import PlannedKey
from fairwin.archive.window_rows import match_in, window_noise
from fairwin.client.greedy_probe import findings
from fairwin.decision import (
    ArchiveNoise,
    ArchiveSnapshot,
    Decision,
    DecisionRow,
    FailedStart,
    RuleSpec,
    SealedInputs,
    WindowContext,
    decide,
    get_rule,
)
from fairwin.directory.layout import WindowDir
from fairwin.directory.manifest import WindowManifest
from fairwin.directory.status import WindowStatus
from fairwin.directory.window_records import WindowRecords
from fairwin.errors import CorruptRecordError, InputError
from fairwin.files import (
    sha256_file,
    write_text_atomic,
)
from fairwin.plan.loading import LoadedPlan, parse_window_plan
from fairwin.records import read_record, read_records, write_record
from fairwin.report.html import write_report
from fairwin.report.markdown import render_summary
from fairwin.telemetry.hold_clocks import HoldClocks
from fairwin.verdict.observed import host_findings, pooled_profile, started_telemetry, unobserved_checks
from fairwin.verdict.recomputed import compared


def context_for(
    loaded: LoadedPlan,
    window: WindowDir,
    mode: str,
    order: str,
    archive: list[ArchiveNoise],
    production_cap_mhz: float | None,
    snapshot: Snapshot,
) -> WindowContext:
    return WindowContext(
        window_id=window.window_id,
        mode=mode,
        cells=list(loaded.plan.cells),
        reported=[name for name, cell in loaded.plan.cells.items() if not cell.decision],
        production_clock_cap_mhz=production_cap_mhz,
        order="candidate-first" if order == "candidate-first" else "control-first",
        candidates=list(chosen.candidates) if (chosen := loaded.plan.all_modes().get(mode)) else [],
        archive=archive,
        archive_snapshot=ArchiveSnapshot(rows=snapshot.count, sha256=snapshot.digest),
        greedy=findings(window, greedy, loaded.base_dir) if (greedy := loaded.plan.diagnostics.greedy) else None,
    )


@dataclass(frozen=True)
class Deciding:
    """What a window's rows are decided with: the same for a sequential rule's looks and for the decide step."""

    mode: str
    order: str
    rule: RuleSpec
    snapshot: Snapshot  # the archive as read once at open, before this window was added
    planned: dict[str, PlannedKey]  # each cell's archive key as known at open (for a cell no control finished)
    production_cap_mhz: float | None
    failed_starts: tuple[FailedStart, ...] = ()  # a many-arm window's candidates whose start failed, so far


def window_context(loaded: LoadedPlan, window: WindowDir, deciding: Deciding, records: WindowRecords) -> WindowContext:
    """The context a window's rows are decided in: the archive's noise keyed as its own control starts (as
    ``planned`` where none of a cell finished). The decide step and a sequential rule's looks both read it."""
    noise = window_noise(deciding.snapshot, deciding.planned, deciding.rule)
    context = context_for(
        loaded, window, deciding.mode, deciding.order, noise, deciding.production_cap_mhz, deciding.snapshot
    )
    return (
        context.model_copy(update={"failed_starts": list(deciding.failed_starts)})
        if deciding.failed_starts
        else context
    )


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
    deciding: Deciding,
    *,
    records: WindowRecords,
    held: Sequence[str] = (),
    stop_reason: str | None = None,
    hold_clocks: HoldClocks | None = None,
    unobserved: Sequence[str] = (),
    production_caps_by_host: dict[str, float | None] | None = None,
) -> Decision:
    """``records``: the window's files as the decide step read them, once; ``stop_reason``: why a sequential
    window stopped before a look settled it; ``hold_clocks``: what the window saw of the clocks outside its starts
    (telemetry/hold_clocks.py); ``unobserved``: what else went unobserved, as verdict/observed.py names it
    (:func:`clocks_unobserved`, :func:`gpus_unobserved`, :func:`production_unobserved`);
    ``production_caps_by_host``: each host's own configured cap."""
    context = window_context(loaded, window, deciding, records)
    seen = hold_clocks or HoldClocks()
    context = context.model_copy(
        update={
            "stop_reason": stop_reason,
            "between_starts_dialbacks": seen.dialbacks or None,
            "between_starts_relocks": seen.relocks or None,
            "watchdog_events": seen.watchdog or None,
            "production_caps_by_host": production_caps_by_host or None,
            "host_findings": host_findings(records.receipts),
            "counters": pooled_profile(records.receipts),
            "unobserved": [*unobserved_checks(records.receipts), *unobserved],
            "accepted_unobserved": list(loaded.plan.runtime.accept_unobserved),
        }
    )
    write_record(window.context, context)
    decision = decide(records.pooled, rule=deciding.rule, context=context).model_copy(update={"inputs": seal(window)})
    write_record(window.decision, decision)
    held = [*held, *(f"warning: {found}" for found in context.host_findings)]  # in summary.md and report.html
    telemetry = started_telemetry(records.receipts)
    summary = render_summary(loaded.path, loaded.sha256, decision, records.pooled, held, telemetry)
    write_text_atomic(window.summary, summary)
    return decision


def report_after_close(window: WindowDir, decision: Decision, say: Callable[[str], None]) -> None:
    """report.html, once the status and the journal are final (its receipts show them). The window's result is
    already whole on disk: a report that cannot be drawn is a warning with the command that redraws it."""
    try:
        write_report(window, decision)
    except Exception as exc:
        say(
            f"warning: report.html could not be written ({type(exc).__name__}: {exc}); "
            f"run `fairwin report {window.path}` to try again"
        )


@dataclass(frozen=True)
class Recomputed:
    """Decisions recomputed from a window directory, and what the check against its record found."""

    decisions: list[Decision]
    notes: list[str]


def _rows(path: Path) -> list[DecisionRow]:
    rows = read_records(path, DecisionRow)
    if not rows:
        raise CorruptRecordError(f"{path} has no rows; a complete window has one per start, cell and repeat")
    return rows


def _recorded(window: WindowDir) -> Decision:
    if not window.decision.exists():
        raise CorruptRecordError(f"{window.decision}: missing, though the window is complete")
    return read_record(window.decision, Decision)


def _check_sealed(window: WindowDir, status: WindowStatus, recorded: Decision) -> None:
    """Refuses any sealed file changed since the decision was written (every decision.json fairwin writes seals
    its inputs: one that does not was not written by fairwin as it is)."""
    sealed = recorded.inputs
    if sealed is None:
        raise CorruptRecordError(f"{window.decision}: records no digest of its inputs; not the file fairwin wrote")
    files = [
        (window.decision, status.decision_sha256, window.status),
        (window.pooled, sealed.pooled_sha256, window.decision),
        (window.context, sealed.context_sha256, window.decision),
        (window.manifest, sealed.manifest_sha256, window.decision),
    ]
    for path, digest, where in files:
        if not isinstance(digest, str):
            raise CorruptRecordError(f"{where}: no digest of {path.name}; it is torn or was edited")
        try:
            now = sha256_file(path)
        except OSError as exc:
            raise CorruptRecordError(f"{path} cannot be read ({exc.strerror}); not the file fairwin wrote") from None
        if now != digest:
            raise CorruptRecordError(
                f"{path} is not the file window {recorded.window_id} was decided with (sha256 {now[:16]}..., "
                f"sealed in {where.name} as {digest[:16]}...): it was edited or damaged, so it is not a result"
            )


def decide_window(
    path: WindowDir | Path | str, rules: Sequence[RuleSpec] = (), archive: Path | str | None = None
) -> Recomputed:
    """Recompute a complete window's decision; with ``archive`` (a path or URL), against that archive's noise as
    it is now, keyed as the window's own control starts.


    The rows and context are checked against the digests sealed in ``decision.json``; with the
    window's own rule and archive, the recomputation is compared with the recorded decision.
    """
    window = path if isinstance(path, WindowDir) else WindowDir.existing(path)
    path = window.path
    status = read_record(window.status, WindowStatus)
    if status.state != "complete":
        raise InputError(
            f"{path} is {status.state!r}, not complete: its rows are not a result "
            f"({status.error or 'no error recorded'})"
        )
    manifest = read_record(window.manifest, WindowManifest)
    recorded = _recorded(window)
    _check_sealed(window, status, recorded)
    notes: list[str] = []
    context = read_record(window.context, WindowContext)
    rows = _rows(window.pooled)
    chosen = list(rules) or [_rule_from(manifest)]
    snapshot = read_archive(archive) if archive is not None else None
    matches = recorded_matches(window, manifest, context) if snapshot is not None else {}
    decisions = []
    for rule in chosen:
        ctx = context
        if snapshot is not None:
            noise = window_noise(snapshot, matches, rule)
            taken = ArchiveSnapshot(rows=snapshot.count, sha256=snapshot.digest)
            ctx = context.model_copy(update={"archive": noise, "archive_snapshot": taken})
        # The same sealed files: the recomputation carries their digests, as the record does.
        sealed = recorded.inputs if archive is None else None
        decisions.append(decide(rows, rule=rule, context=ctx).model_copy(update={"inputs": sealed}))
    if archive is None and [d.rule_id for d in decisions] == [recorded.rule_id]:
        notes.append(compared(recorded, decisions[0]))
    return Recomputed(decisions=decisions, notes=notes)


def recorded_matches(window: WindowDir, manifest: WindowManifest, context: WindowContext) -> dict[str, PlannedKey]:
    """Each cell's archive match as the window made it at open, from its directory: its plan's copy (with its
    recorded overrides), its archive key and production's cap as its context recorded them."""
    if manifest.archive_key is None:
        raise InputError(f"{window.path}/window.json has no archive_key (an older fairwin's): it cannot be matched")
    plan = parse_window_plan(window)
    return {
        cell: match_in(
            plan, manifest.archive_key, manifest.mode, manifest.control_role, cell, context.production_clock_cap_mhz
        )
        for cell in context.cells
    }


def _rule_from(manifest: WindowManifest) -> RuleSpec:
    rule = get_rule(manifest.rule_id)
    if rule.sha256 != manifest.rule_sha256:
        raise InputError(
            f"rule {rule.id} is registered with sha256 {rule.sha256}, but the window was decided by "
            f"{manifest.rule_sha256}; a rule's definition must never change under its id"
        )
    return rule


def completed_decision(path: WindowDir | Path | str) -> Decision:
    """A complete window's recorded decision, checked against the digest its status sealed (for comparisons)."""
    window = path if isinstance(path, WindowDir) else WindowDir.existing(path)
    status = read_record(window.status, WindowStatus)
    if status.state != "complete":
        why = f" ({status.error})" if status.error else ""
        raise InputError(f"{window.path} is {status.state!r}, not complete{why}: it has no decision")
    recorded = _recorded(window)
    sealed = status.decision_sha256
    if sealed is not None and sha256_file(window.decision) != sealed:
        raise CorruptRecordError(f"{window.decision}: changed since the window sealed it (status.json)")
    return recorded
