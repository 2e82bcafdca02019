"""The base of every plan section: unknown keys are errors (a typo is never silently ignored), values frozen."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: What a name in a plan (role, mode, family, cell, placeholder) may be.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
