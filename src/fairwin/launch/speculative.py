"""The speculative config a server's command line asks for: vLLM's ``--speculative-config JSON``, llama.cpp's
``llama-server --spec-type ...`` with its ``--spec-*`` options and draft model, and ``fairwin sim``'s
``--spec-tokens``; read from a role's argv at every start and from production's live command line."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import JsonValue

from fairwin.errors import PlanError

SPEC_FLAGS = ("--speculative-config", "--speculative_config")
#: llama-server's options that shape what it drafts and how it verifies (llama.cpp's common/arg.cpp), each with
#: one value, by the name the config records them under; its ``--spec-ngram-*`` options are all of this kind.
#: Threads, CPUs and devices of the draft are left out: they change how fast, not what is speculated.
LLAMA_VALUED = {
    "--spec-type": "spec-type",
    "--spec-draft-model": "spec-draft-model",
    "-md": "spec-draft-model",
    "--model-draft": "spec-draft-model",
    "--spec-draft-n-max": "spec-draft-n-max",
    "--spec-draft-n-min": "spec-draft-n-min",
    "--spec-draft-p-min": "spec-draft-p-min",
    "--draft-p-min": "spec-draft-p-min",
    "--spec-draft-p-split": "spec-draft-p-split",
    "--draft-p-split": "spec-draft-p-split",
    "--spec-draft-sampling": "spec-draft-sampling",
    "--spec-synth-len": "spec-synth-len",
    "--spec-synth-rates": "spec-synth-rates",
}
LLAMA_NGRAM_PREFIX = "--spec-ngram-"
LLAMA_SWITCHES = {"--spec-default": "spec-default"}
#: llama.cpp's synthetic acceptance (benchmarking only): drafts accepted at a given rate, not verified.
LLAMA_SYNTHETIC = ("spec-synth-len", "spec-synth-rates")


def _llama_name(flag: str) -> str | None:
    if flag in LLAMA_VALUED:
        return LLAMA_VALUED[flag]
    return flag[2:] if flag.startswith(LLAMA_NGRAM_PREFIX) else None


def stated_speculative(argv: Sequence[str]) -> dict[str, JsonValue] | None:
    """The speculative config the launch arguments state; None where they state none (a wrapper script, or a
    server started plainly, may still speculate: only the server's own report tells)."""
    flags = {arg.partition("=")[0] for arg in argv}
    if flags & {*SPEC_FLAGS, "--spec-tokens"}:
        return effective_speculative(argv)
    if any(_llama_name(flag) or flag in LLAMA_SWITCHES for flag in flags):
        return llama_speculative(argv)
    return None


def llama_speculative(argv: Sequence[str]) -> dict[str, JsonValue]:
    """llama-server's speculative options as a config: ``method`` (its ``--spec-type``), then each option by its
    long name without dashes, as given; {} where ``--spec-type none`` and nothing else asks for a draft."""
    found: dict[str, JsonValue] = {}
    for index, arg in enumerate(argv):
        flag, eq, inline = arg.partition("=")
        if flag in LLAMA_SWITCHES:
            found[LLAMA_SWITCHES[flag]] = True
        elif (name := _llama_name(flag)) is not None:
            value = inline if eq else (argv[index + 1] if index + 1 < len(argv) else "")
            if not value or value.startswith("--"):
                raise PlanError(f"a role's argv: {flag} needs a value")
            found[name] = value
    method = found.pop("spec-type", None)
    if method == "none" and not found:
        return {}
    return {"method": method or "draft", **found} if method or found else {}


def effective_speculative(argv: Sequence[str]) -> dict[str, JsonValue]:
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
