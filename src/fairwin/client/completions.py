"""The greedy diagnostics' request and the answer's logprobs (/v1/completions, not streamed)."""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from fairwin.errors import InputError

PATH = "/v1/completions"


def request(model: str, text: str, max_tokens: int, cache_salt: str) -> dict[str, JsonValue]:
    """The diagnostics' request shape (the rehearsal tries it too): one answer, temperature 0, EOS ignored,
    the top two logprobs of every position."""
    return {
        "model": model,
        "prompt": text,
        "max_tokens": max_tokens,
        "temperature": 0,
        "logprobs": 2,
        "ignore_eos": True,
        "stream": False,
        "cache_salt": cache_salt,
    }


def parse(answer: Any, where: str) -> tuple[list[str], list[list[tuple[str, float]]]]:
    """(tokens, per position its top-2 (token, logprob), best first) from a completions answer."""
    try:
        logprobs = answer["choices"][0]["logprobs"]
        tokens = [str(t) for t in logprobs["tokens"]]
        top = [
            sorted(((str(k), float(v)) for k, v in (p or {}).items()), key=lambda kv: -kv[1])[:2]
            for p in logprobs.get("top_logprobs") or []
        ]
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        raise InputError(
            f"{where}: the answer has no completions logprobs (tokens, top_logprobs); does the "
            "server support logprobs on /v1/completions?"
        ) from None
    return tokens, top
