"""Decisions recomputed from stored data: a window directory, or a pooled JSONL file alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fairwin.decision import RULES, Decision, DecisionRow, RuleSpec, WindowContext, decide, get_rule
from fairwin.errors import InputError
from fairwin.plan.loading import parse_plan
from fairwin.receipts import read_jsonl
from fairwin.window.close import archive_noise


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path} does not exist; is this a fairwin window directory?") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None


def decide_window_dir(window: Path, rules: list[RuleSpec], archive: Path | None = None) -> list[Decision]:
    """Recompute a complete window's decision; with ``archive``, against that archive's noise as it is now."""
    status = _json(window / "status.json")
    if status.get("state") != "complete":
        raise InputError(
            f"{window} is {status.get('state')!r}, not complete: its rows are not a result "
            f"({status.get('error', 'no error recorded')})"
        )
    manifest = _json(window / "window.json")
    stored = _json(window / "context.json")
    stored.pop("format", None)
    context = WindowContext.model_validate(stored)
    rows = [DecisionRow.model_validate(row) for row in read_jsonl(window / "pooled.jsonl")]
    chosen = rules or [_rule_from(manifest)]
    decisions = []
    for rule in chosen:
        ctx = context
        if archive is not None:
            _, plan = parse_plan(window / "plan.toml")
            commit = manifest.get("environment", {}).get("git", {}).get("commit")
            noise = archive_noise(archive, plan.cells, rule, commit, context.production_clock_cap_mhz)
            ctx = context.model_copy(update={"archive": noise})
        decisions.append(decide(rows, rule=rule, context=ctx))
    return decisions


def _rule_from(manifest: dict[str, Any]) -> RuleSpec:
    rule = get_rule(manifest["rule_id"])
    if rule.sha256 != manifest.get("rule_sha256"):
        raise InputError(
            f"rule {rule.id} is registered with sha256 {rule.sha256}, but the window was decided by "
            f"{manifest.get('rule_sha256')}; a rule's definition must never change under its id"
        )
    return rule


def load_pooled(path: Path) -> list[DecisionRow]:
    rows: list[DecisionRow] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"{path} does not exist") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(DecisionRow.model_validate_json(line))
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"]) or "(row)"
            raise InputError(
                f"{path}:{number}: {where}: {error['msg']}; see docs/decision.md for the pooled-row schema"
            ) from None
    if not rows:
        raise InputError(f"{path}: no rows")
    return rows


def default_rule_for(path: Path, rows: list[DecisionRow]) -> RuleSpec:
    """The default rule, when it registers as many starts as the rows come from; else a clear refusal."""
    rule = get_rule(None)
    ran = len({row.start for row in rows})
    if ran == rule.start_count:
        return rule
    fitting = sorted(r.id for r in RULES.values() if r.start_count == ran)
    raise InputError(
        f"{path}: the rows come from {ran} start{'s' if ran != 1 else ''} and the default rule {rule.id} registers "
        f"{rule.start_count}; "
        f"name the rule with --rule ({', '.join(fitting) or 'no registered rule'} decides {ran})"
    )


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
