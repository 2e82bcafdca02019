"""``fairwin plan check --tokenizer FILE`` (or ``--tokenize-url URL``): every prompt a cell sends is long enough.

A window cuts each prompt its waves send to the cell's ``prompt_tokens`` with the first start's
tokenizer, and refuses a prompt shorter than that less its tolerance: after production was taken
down and a server launched. This check counts the same prompts before any of that, with a local
``tokenizer.json`` or a running server's ``/tokenize``, and names every short one at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import aiohttp

from fairwin.client.prepare import LocalTokenizer, TokenCounter, TokenizeClient, cut_to_tokens, length_problem
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.schedule import prompts_sent, waves_for


@dataclass(frozen=True)
class PromptLengths:
    """What the check counted: prompts per cell, the shortest, and each prompt too short to cut."""

    counted: int
    shortest: dict[str, int]  # cell -> the fewest tokens any of its prompts has once cut
    short: list[str]  # "cell short-b1: prompt prose/p07 has only 3120 tokens, the cell wants 4096 (tolerance 16)"


async def check_prompt_lengths(
    loaded: LoadedPlan, *, tokenizer: Path | None = None, tokenize_url: str | None = None, model: str = ""
) -> PromptLengths:
    """Every prompt each cell's waves send, counted as the window will count it (a server's count may exceed a
    local tokenizer's by its BOS token: the local count is the stricter)."""
    async with aiohttp.ClientSession() as session:
        counted, shortest, short = 0, dict[str, int](), list[str]()
        for name, cell in loaded.plan.cells.items():
            counter: TokenCounter = (
                LocalTokenizer(tokenizer)
                if tokenizer is not None
                else TokenizeClient(session, (tokenize_url or "").rstrip("/"), model, cell.endpoint)
            )
            for (family, _), prompt in sorted(prompts_sent(waves_for(loaded, name)).items()):
                _, tokens = await cut_to_tokens(counter, prompt.text, cell.prompt_tokens)
                counted += 1
                shortest[name] = min(shortest.get(name, tokens), tokens)
                target, tolerance = cell.prompt_tokens, cell.prompt_tokens_tolerance
                if problem := length_problem(name, family, prompt, tokens, target, tolerance):
                    short.append(problem)
        return PromptLengths(counted=counted, shortest=shortest, short=short)
