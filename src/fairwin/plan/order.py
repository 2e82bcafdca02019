"""A family's frozen prompt order (``fairwin.order/1``): written by ``fairwin prompts``, pinned by a plan.

The file's bytes are pinned by sha256 in the plan, so it is written the one way
(``json.dumps(..., indent=2)``) and never rewritten. An order file that spells its format
as ``schema`` (as earlier fairwin wrote it) reads the same, with a notice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, ValidationError

from fairwin.errors import PlanError
from fairwin.files import write_text_atomic
from fairwin.formats import ORDER, RecordFormat
from fairwin.records import Record


class PromptOrder(Record):
    """``fairwin.order/1``: the ids of a family's prompts in the order waves take them."""

    record_format: ClassVar[RecordFormat] = ORDER
    model_config = ConfigDict(extra="forbid")

    format: Literal["fairwin.order/1"] = "fairwin.order/1"
    family: str | None = None
    seed: int | None = None
    ids: list[str] = Field(min_length=1)


def order_text(order: PromptOrder) -> str:
    """The one way an order file is written: its bytes are pinned."""
    return json.dumps(order.stored(), indent=2) + "\n"


def write_order(path: Path, order: PromptOrder) -> None:
    write_text_atomic(path, order_text(order))


def read_order(path: Path, family: str) -> tuple[list[str], str | None]:
    """The frozen order's ids, and a notice when the file names its format the old way (``schema``)."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise PlanError(f"{path}: not a JSON order file; write one with `fairwin prompts`") from None
    notice = None
    if isinstance(data, dict) and "format" not in data and data.get("schema") == ORDER.id:
        notice = (
            f"{path} names its format as 'schema', as earlier fairwin wrote it; read the same "
            "(`fairwin prompts` now writes 'format')"
        )
        data = {key: value for key, value in data.items() if key != "schema"} | {"format": ORDER.id}
    if not isinstance(data, dict) or data.get("format") != ORDER.id or not isinstance(data.get("ids"), list):
        raise PlanError(f"{path}: not a {ORDER.id} file with an 'ids' list; write one with `fairwin prompts`")
    if data.get("family") not in (None, family):
        raise PlanError(f"{path}: order file is for family {data['family']!r}, not {family!r}")
    if not data["ids"]:
        raise PlanError(f"{path}: order file lists no ids")
    try:
        order = PromptOrder.model_validate({**data, "ids": [str(item) for item in data["ids"]]})
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"]
        raise PlanError(f"{path}: not a {ORDER.id} file ({problem}); write one with `fairwin prompts`") from None
    return order.ids, notice
