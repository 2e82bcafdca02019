"""``fairwin decide --pooled``: a decision from a file of pooled rows alone, written by hand or by a window.

Every line must be a whole, valid row (errors name the line, for a file fixed in an
editor); the rule is the one named, else the default one that decides as many starts (rows of
several candidate roles: win-arms-v1, the candidates in the order they first ran).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from fairwin.decision import RULES, Decision, DecisionRow, RuleSpec, WindowContext, decide, get_rule
from fairwin.errors import InputError
from fairwin.files import first_problem
from fairwin.rules.registry import WIN_ARMS_V1


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


def default_rule_for(path: Path, rows: list[DecisionRow]) -> tuple[RuleSpec, list[str]]:
    """The default rule, with a note where the rows end before its first look (decided as ``fairwin.decide``
    decides them: a window that ended there); a clear refusal where they come from more starts than it registers."""
    rule = get_rule(None)
    ran = len({row.start for row in rows})
    fitting = sorted(r.id for r in RULES.values() if _decides(r, ran))
    naming = f"{', '.join(fitting) or 'no registered rule'} decide{'s' if len(fitting) == 1 else ''} {ran}"
    if _decides(rule, ran):
        return rule, []
    if rule.looks and ran < rule.first_look(0):
        return rule, [
            f"{path}: the rows come from {ran} start{'s' if ran != 1 else ''}, fewer than the default rule "
            f"{rule.id}'s first look without an archive ({rule.first_look(0)}): decided as a window that ended "
            f"there; {naming} start{'s' if ran != 1 else ''}: name one with --rule"
        ]
    registers = f"looks from {rule.first_look(0)} to {rule.start_count} starts" if rule.looks else f"{rule.start_count}"
    raise InputError(
        f"{path}: the rows come from {ran} start{'s' if ran != 1 else ''} and the default rule {rule.id} registers "
        f"{registers} (no archive here); name the rule with --rule ({naming})"
    )


def _decides(rule: RuleSpec, ran: int) -> bool:
    """A fixed rule decides its own number of starts; a sequential one any number from its first look without an
    archive (``decide --pooled`` has none) to its maximum: the look at that number."""
    if rule.looks:
        return rule.first_look(0) <= ran <= rule.start_count
    return ran == rule.start_count


def decide_pooled(
    path: Path, *, mode: str, rules: list[RuleSpec], clock_cap_mhz: float | None, reported: list[str]
) -> tuple[list[Decision], list[str]]:
    """Every named rule's decision of the rows (the default rule's when none is named), and notes on them."""
    rows = load_pooled(path)
    notes: list[str] = []
    # A many-arm window's rows name each candidate by its role: in the order they first ran (no plan here).
    candidates = list(dict.fromkeys(row.role for row in rows if row.kind == "candidate" and row.role))
    many = len(candidates) > 1
    if not rules:
        default, notes = (WIN_ARMS_V1, []) if many else default_rule_for(path, rows)
        rules = [default]
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
        candidates=candidates if many else [],
    )
    return [decide(rows, rule=rule, context=context) for rule in rules], notes
