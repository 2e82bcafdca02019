"""The plan's ``[secrets]``: env names and argv flags that hold secrets, beyond the built-in ones."""

from __future__ import annotations

from pydantic import Field

from fairwin.plan.base import StrictModel


class SecretsSettings(StrictModel):
    """Names and flags beyond the built-in ones (names with KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL)."""

    names: list[str] = Field(default_factory=list, description="More env variable names that hold secrets.")
    flags: list[str] = Field(default_factory=list, description="More argv flags whose next argument is a secret.")
    public: list[str] = Field(
        default_factory=list, description="Names or flags that look secret but are not (e.g. KEY_ORDER)."
    )
