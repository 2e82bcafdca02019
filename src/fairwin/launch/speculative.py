"""The speculative config a server's command line asks for: vLLM's ``--speculative-config JSON`` and ``fairwin
sim``'s ``--spec-tokens``; read from a role's argv at every start and from production's live command line."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fairwin.errors import PlanError

SPEC_FLAGS = ("--speculative-config", "--speculative_config")


def stated_speculative(argv: Sequence[str]) -> dict[str, Any] | None:
    """The speculative config the launch arguments state; None where they state none (a wrapper script, or a
    server started plainly, may still speculate: only the server's own report tells)."""
    if not any(arg.partition("=")[0] in (*SPEC_FLAGS, "--spec-tokens") for arg in argv):
        return None
    return effective_speculative(argv)


def effective_speculative(argv: Sequence[str]) -> dict[str, Any]:
    """The speculative config the launch arguments ask for; {} for none."""
    for index, arg in enumerate(argv):
        name, eq, inline = arg.partition("=")
        if name in SPEC_FLAGS:
            value = inline if eq else (argv[index + 1] if index + 1 < len(argv) else "")
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError:
                raise PlanError(f"a role's argv: {name} is not JSON: {value!r}") from None
            if not isinstance(parsed, dict):
                raise PlanError(f"a role's argv: {name} must be a JSON object, got {value!r}")
            return parsed
        if name == "--spec-tokens":  # fairwin sim
            value = inline if eq else (argv[index + 1] if index + 1 < len(argv) else "0")
            if not value.strip().isdigit():
                raise PlanError(f"a role's argv: --spec-tokens must be a whole number of draft tokens, got {value!r}")
            tokens = int(value)
            return {"method": "sim", "num_speculative_tokens": tokens} if tokens > 0 else {}
    return {}
