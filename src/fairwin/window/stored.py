"""Decisions recomputed from stored data: a window directory, or a pooled JSONL file alone."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fairwin.archive import read_archive
from fairwin.decision import RULES, ArchiveSnapshot, Decision, DecisionRow, RuleSpec, WindowContext, decide, get_rule
from fairwin.errors import CorruptRecordError, InputError
from fairwin.files import first_problem, read_json, read_jsonl, read_model, sha256_file
from fairwin.formats import CONTEXT, DECISION, POOLED, STATUS, WINDOW, WindowStatus
from fairwin.window.archiving import control_rows, window_noise
from fairwin.window.layout import WindowDir


@dataclass(frozen=True)
class Recomputed:
    """Decisions recomputed from a window directory, and what the check against its record found."""

    decisions: list[Decision]
    notes: list[str]


def _rows(path: Path) -> list[DecisionRow]:
    stored = read_jsonl(path, POOLED.readable)
    if not stored:
        raise CorruptRecordError(f"{path} has no rows; a complete window has one per start, cell and repeat")
    rows = []
    for number, row in enumerate(stored, 1):
        try:
            rows.append(DecisionRow.model_validate(row))
        except ValidationError as exc:
            raise CorruptRecordError(f"{path} row {number}: {first_problem(exc)}") from None
    return rows


def _context(path: Path) -> WindowContext:
    stored = read_json(path, CONTEXT.readable)
    stored.pop("format")
    try:
        return WindowContext.model_validate(stored)
    except ValidationError as exc:
        raise CorruptRecordError(f"{path}: {first_problem(exc)}") from None


def _recorded(window: WindowDir) -> Decision | None:
    return read_model(window.decision, Decision, DECISION.readable) if window.decision.exists() else None


def _check_sealed(window: WindowDir, status: dict[str, Any], recorded: Decision | None) -> list[str]:
    """Refuses any sealed file changed since the decision was written; says when nothing was sealed."""
    if recorded is None or recorded.inputs is None:
        return [f"{window.decision.name} records no digest of its inputs (written before fairwin sealed them)"]
    sealed = recorded.inputs
    files = [
        (window.decision, status.get("decision_sha256"), window.status),
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
    return []


#: Recomputed numbers that differ from the record by less than this (relative) differ by rounding only: linear
#: algebra libraries (numpy's OpenBLAS, by build and CPU) round least squares differently in the last digits.
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


def _compared(recorded: Decision | None, recomputed: Decision) -> str:
    if recorded is None:
        return "no recorded decision.json to compare with"
    before = recorded.model_dump(mode="json", exclude={"inputs"})
    difference = rounding_difference(before, recomputed.model_dump(mode="json", exclude={"inputs"}))
    if difference == 0.0:
        return f"recomputed: identical to the recorded decision ({recorded.verdict})"
    if difference is not None:
        return (f"recomputed: identical to the recorded decision ({recorded.verdict}) but for float rounding (largest "
                f"relative difference {difference:.1e}: this machine's linear algebra rounds differently)")  # fmt: skip
    return (
        f"recomputed: DIFFERS from the recorded decision (recorded {recorded.verdict}, now {recomputed.verdict}); "
        "the inputs are the sealed ones, so the deciding code changed"
    )


def decide_window(path: Path | str, rules: Sequence[RuleSpec] = (), archive: Path | str | None = None) -> Recomputed:
    """Recompute a complete window's decision; with ``archive`` (a path or URL), against that archive's noise as
    it is now, keyed as the window's own control starts.

    The rows and context are checked against the digests sealed in ``decision.json``; with the
    window's own rule and archive, the recomputation is compared with the recorded decision.
    """
    window = WindowDir.existing(path)
    path = window.path
    status = read_model(window.status, WindowStatus, STATUS.readable).model_dump()  # extras kept: verdict, error
    if status.get("state") != "complete":
        raise InputError(
            f"{path} is {status.get('state')!r}, not complete: its rows are not a result "
            f"({status.get('error', 'no error recorded')})"
        )
    manifest = read_json(window.manifest, WINDOW.readable)
    recorded = _recorded(window)
    notes = _check_sealed(window, status, recorded)
    context = _context(window.context)
    rows = _rows(window.pooled)
    chosen = list(rules) or [_rule_from(window.manifest, manifest)]
    snapshot = read_archive(archive) if archive is not None else None
    own = control_rows(window.path) if snapshot is not None else []
    decisions = []
    for rule in chosen:
        ctx = context
        if snapshot is not None:
            noise = window_noise(snapshot, own, {cell: {"cell": cell} for cell in context.cells}, rule)
            taken = ArchiveSnapshot(rows=snapshot.count, sha256=snapshot.digest)
            ctx = context.model_copy(update={"archive": noise, "archive_snapshot": taken})
        # The same sealed files: the recomputation carries their digests, as the record does.
        sealed = recorded.inputs if recorded is not None and archive is None else None
        decisions.append(decide(rows, rule=rule, context=ctx).model_copy(update={"inputs": sealed}))
    if archive is None and recorded is not None and [d.rule_id for d in decisions] == [recorded.rule_id]:
        notes.append(_compared(recorded, decisions[0]))
    return Recomputed(decisions=decisions, notes=notes)


def _rule_from(path: Path, manifest: dict[str, Any]) -> RuleSpec:
    rule_id = manifest.get("rule_id")
    if not isinstance(rule_id, str):
        raise CorruptRecordError(f"{path}: no rule_id; it is not the file fairwin wrote there")
    rule = get_rule(rule_id)
    if rule.sha256 != manifest.get("rule_sha256"):
        raise InputError(
            f"rule {rule.id} is registered with sha256 {rule.sha256}, but the window was decided by "
            f"{manifest.get('rule_sha256')}; a rule's definition must never change under its id"
        )
    return rule


def load_pooled(path: Path) -> list[DecisionRow]:
    """Rows written by hand or by a window, for ``decide --pooled``: every line a whole, valid row.

    Errors name the line (a hand-written file is fixed in an editor), so the lines are read here.
    """
    rows: list[DecisionRow] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"{path} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a directory, not a file of pooled rows") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text; is it a pooled JSONL file?") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(DecisionRow.model_validate_json(line))
        except ValidationError as exc:
            raise InputError(
                f"{path}:{number}: {first_problem(exc, '(row)')}; see docs/decision.md for the pooled-row schema"
            ) from None
    if not rows:
        raise InputError(f"{path}: no rows")
    return rows


def default_rule_for(path: Path, rows: list[DecisionRow]) -> RuleSpec:
    """The default rule, when it registers as many starts as the rows come from; else a clear refusal."""
    rule = get_rule(None)
    ran = len({row.start for row in rows})
    if _decides(rule, ran):
        return rule
    fitting = sorted(r.id for r in RULES.values() if _decides(r, ran))
    registers = f"looks from {rule.first_look(0)} to {rule.start_count} starts" if rule.looks else f"{rule.start_count}"
    raise InputError(
        f"{path}: the rows come from {ran} start{'s' if ran != 1 else ''} and the default rule {rule.id} registers "
        f"{registers} (no archive here); "
        f"name the rule with --rule ({', '.join(fitting) or 'no registered rule'} decides {ran})"
    )


def _decides(rule: RuleSpec, ran: int) -> bool:
    """A fixed rule decides its own number of starts; a sequential one any number from its first look without an
    archive (``decide --pooled`` has none) to its maximum: the look at that number."""
    if rule.looks:
        return rule.first_look(0) <= ran <= rule.start_count
    return ran == rule.start_count


def decide_pooled(
    path: Path, *, mode: str, rules: list[RuleSpec], clock_cap_mhz: float | None, reported: list[str]
) -> list[Decision]:
    rows = load_pooled(path)
    rules = rules or [default_rule_for(path, rows)]
    cells = list(dict.fromkeys(row.cell for row in rows))
    unknown = sorted(set(reported) - set(cells))
    if unknown:
        raise InputError(f"--reported names cells not in {path}: {', '.join(unknown)}; cells: {', '.join(cells)}")
    context = WindowContext(
        window_id=path.stem,
        mode=mode,
        cells=cells,
        reported=reported,
        production_clock_cap_mhz=clock_cap_mhz,
    )
    return [decide(rows, rule=rule, context=context) for rule in rules]


def completed_decision(path: Path | str) -> Decision:
    """A complete window's recorded decision, checked against the digest its status sealed (for comparisons)."""
    window = WindowDir.existing(path)
    status = read_model(window.status, WindowStatus, STATUS.readable).model_dump()
    if status.get("state") != "complete":
        raise InputError(f"{window.path} is {status.get('state')!r}, not complete: it has no decision to compare")
    recorded = _recorded(window)
    if recorded is None:
        raise CorruptRecordError(f"{window.decision}: missing, though the window is complete")
    sealed = status.get("decision_sha256")
    if sealed is not None and sha256_file(window.decision) != sealed:
        raise CorruptRecordError(f"{window.decision}: changed since the window sealed it (status.json)")
    return recorded
