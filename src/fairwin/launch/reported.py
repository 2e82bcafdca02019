"""The speculative config a running server reports about itself, read from its start-up log.

A role's argv may not hold its config: a wrapper script (``serve.sh``) or an environment
variable (``SPEC_OVERRIDE``) can add ``--speculative-config`` where fairwin never sees it.
vLLM logs the arguments it was really started with, as a Python dict, on one line at start-up
(``non-default args: {...}``, ``speculative_config`` among them when set), and ``fairwin sim``
logs the same line (``spec_tokens``). That line is what the runtime checks compare; the argv
is used only for a server whose log has no such line (see window/start.py).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from pydantic import JsonValue

NON_DEFAULT = "non-default args: "
_SIM_TOKENS = re.compile(r"'spec_tokens': (\d+)")
_VLLM_KEY = "'speculative_config': "


def _literal_at(text: str, start: int) -> Any:
    """The Python literal (a dict, or a quoted JSON string) that begins at ``start``; ValueError if none does."""
    if text[start : start + 1] in ("'", '"'):
        end = text.index(text[start], start + 1)
        return json.loads(text[start + 1 : end])
    depth = 0
    for index in range(start, len(text)):  # a dict's own braces: the config holds no braces inside strings
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return ast.literal_eval(text[start : index + 1])
    raise ValueError("unbalanced")


def reported_speculative(log_text: str) -> dict[str, JsonValue] | None:
    """The speculative config from the server's last ``non-default args`` line: {} when it names none (the server
    does not speculate); None when the log has no such line or it cannot be read (nothing was observed)."""
    lines = [line for line in log_text.splitlines() if NON_DEFAULT in line]
    if not lines:
        return None
    args = lines[-1].split(NON_DEFAULT, 1)[1]
    if (tokens := _SIM_TOKENS.search(args)) is not None:
        count = int(tokens.group(1))
        return {"method": "sim", "num_speculative_tokens": count} if count > 0 else {}
    at = args.find(_VLLM_KEY)
    if at < 0:
        return {}
    try:
        found = _literal_at(args, at + len(_VLLM_KEY))
    except (ValueError, SyntaxError, json.JSONDecodeError):
        return None
    if found is None:
        return {}
    if not isinstance(found, dict):
        return None
    # As JSON holds it (a Python literal's tuples become lists): compared with a plan's lists, stored in start.json.
    as_json: dict[str, JsonValue] = json.loads(json.dumps(found, default=str))
    return as_json
