"""A frozen prompt order a team already has (the runbook's ``ORDERS``), brought in as pinned order files.

The team's windows have taken their prompts in a fixed order for months; converting it by
hand risks the one thing it must not change. ``fairwin prompts import ORDERS.json`` reads
the lists of prompt ids per family, checks every id against the family's prompts file (each
once, each present), and writes ``NAME.order.json`` (``fairwin.order/1``) with the plan
snippet that pins both files. An order file already there is left as it is when its bytes
are the same, and refused when they are not: a pinned order is never rewritten.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fairwin.client.families import BuiltFamily
from fairwin.errors import InputError
from fairwin.files import sha256_file
from fairwin.plan.loading import read_prompts
from fairwin.plan.order import PromptOrder, order_text, write_order


def read_orders(path: Path) -> dict[str, list[str]]:
    """``{"family": ["id", ...], ...}``: each family's prompt ids in the order its windows take them."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError(f'{path}: not JSON; give each family\'s ids as {{"prose": ["p3", "p1", ...]}}') from None
    if not isinstance(data, dict) or not data:
        raise InputError(f'{path}: not an object of families; give {{"prose": ["p3", "p1", ...]}}')
    orders: dict[str, list[str]] = {}
    for family, ids in data.items():
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str | int) for i in ids):
            raise InputError(f"{path}: family {family!r} is not a non-empty list of prompt ids")
        orders[family] = [str(i) for i in ids]
    return orders


def _checked(family: str, ids: list[str], prompts: Path) -> None:
    repeated = sorted(i for i, n in Counter(ids).items() if n > 1)
    if repeated:
        raise InputError(f"family {family}: ids {repeated[:5]} appear more than once in its order")
    known = read_prompts(prompts, f"--family {family}")  # read once, as a plan reads it
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise InputError(f"family {family}: ids {unknown[:5]} are not in {prompts}")


def import_orders(orders: Mapping[str, list[str]], prompts: Mapping[str, Path], out_dir: Path) -> list[BuiltFamily]:
    """Each family's order written as ``out_dir/NAME.order.json``, every family checked before any is written."""
    missing, extra = sorted(set(orders) - set(prompts)), sorted(set(prompts) - set(orders))
    if missing:
        raise InputError(f"no prompts file for family {', '.join(missing)}; give --family NAME=PROMPTS.jsonl")
    if extra:
        raise InputError(f"the orders name no family {', '.join(extra)}; leave out its --family")
    made = {family: PromptOrder(family=family, ids=ids) for family, ids in orders.items()}
    for family, ids in orders.items():
        _checked(family, ids, prompts[family])
        target = out_dir / f"{family}.order.json"
        if target.exists() and target.read_text(encoding="utf-8", errors="replace") != order_text(made[family]):
            raise InputError(f"{target} exists with another order; a pinned order is never rewritten: move it")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for family, order in made.items():
        target = out_dir / f"{family}.order.json"
        if not target.exists():
            write_order(target, order)
        written.append(
            BuiltFamily(
                name=family,
                prompts_path=prompts[family],
                order_path=target,
                prompts_sha256=sha256_file(prompts[family]),
                order_sha256=sha256_file(target),
                count=len(order.ids),
            )
        )
    return written
