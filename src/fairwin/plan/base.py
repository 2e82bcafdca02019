"""The base of every plan section: unknown keys are errors (a typo is never silently ignored), values frozen."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: What a name in a plan (role, mode, family, cell, placeholder) may be.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_names(value: dict[str, Any], what: str = "name") -> dict[str, Any]:
    """A table's keys are plan names (NAME_RE), or a ValueError naming the first that is not."""
    for name in value:
        if not NAME_RE.match(name):
            raise ValueError(f"{what} {name!r} must be letters, digits, '_', '.', '-'")
    return value
