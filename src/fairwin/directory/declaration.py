"""Production's declaration as a window records it: what the plan says production is, named by its sha256.

A production the plan launches (``[production] role``) is declared by its argv, environment, env files'
digests and base URL (and its host and container, only where it has them: a production here keeps the
sha256 it always had); one managed elsewhere by its up and down commands and base URL. The sha256 is taken
over exactly the fields the declaration has, so the same declaration always has the same name. A window
adds ``live``, production as it really ran, read before the take-down (``fairwin.production-live/1``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from fairwin.files import canonical_json, sha256_bytes


class ProductionDeclaration(BaseModel):
    """One declaration of either kind; only the fields it has are set, and only those are digested."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str | None = None
    argv: list[str] | None = None
    env: dict[str, str] | None = None
    env_files: dict[str, str] | None = None  # each env file's path -> its sha256
    up: list[str] | None = None
    down: list[str] | None = None
    base_url: str | None = None
    host: str | None = None
    container: dict[str, Any] | None = None  # the role's [container] table as the plan states it
    sha256: str
    live: dict[str, Any] | None = None  # fairwin.production-live/1, as the window read it

    @classmethod
    def of(cls, **declared: Any) -> ProductionDeclaration:
        """A declaration named by the sha256 of exactly the fields given."""
        return cls(**declared, sha256=sha256_bytes(canonical_json(declared).encode()))

    @model_serializer(mode="wrap")
    def _only_its_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Whatever holds it (window.json, the marker, production.json): only the fields this declaration has,
        # so a stored one reads back with exactly its fields and a production here gains no null host.
        dumped: dict[str, Any] = handler(self)
        return {key: value for key, value in dumped.items() if key in self.model_fields_set}

    def declared(self) -> dict[str, Any]:
        """The fields the declaration has, as digested (``sha256`` and ``live`` are not part of it)."""
        return self.model_dump(mode="json", exclude={"sha256", "live"})

    def stored(self) -> dict[str, Any]:
        """As the journal keeps it: its own fields, its sha256, its reading."""
        return self.model_dump(mode="json")
