from __future__ import annotations

import asyncio

import pytest

from fairwin.client.prepare import TokenizeClient, cut_to_tokens, prepare
from fairwin.errors import PromptError
from fairwin.plan.loading import Prompt
from fairwin.sim.model import tokenize


class WordTokenizer(TokenizeClient):
    """The simulator's tokenizer, counted locally; records how many calls the cut needed."""

    def __init__(self) -> None:
        self.calls = 0

    async def count(self, text: str) -> int:
        self.calls += 1
        return len(tokenize(text))


TEXT = " ".join(f"w{i}" for i in range(5000))


@pytest.mark.parametrize("target", [1, 7, 64, 1000, 4999])
def test_cut_is_the_longest_prefix_within_target(target: int) -> None:
    tok = WordTokenizer()
    text, count = asyncio.run(cut_to_tokens(tok, TEXT, target))
    assert count == target == len(tokenize(text))
    assert TEXT.startswith(text)
    assert len(tokenize(TEXT[: len(text) + 1])) > target or len(text) == len(TEXT)
    assert tok.calls <= 20  # bisection, not a scan


def test_short_text_is_kept_whole() -> None:
    text, count = asyncio.run(cut_to_tokens(WordTokenizer(), "a b c", 10))
    assert (text, count) == ("a b c", 3)


def test_too_short_prompt_refuses_with_advice() -> None:
    with pytest.raises(PromptError, match=r"prompt prose/p1 has only 3 tokens, the cell wants 100 \(tolerance 8\)"):
        asyncio.run(prepare(WordTokenizer(), "short-b1", "prose", Prompt("p1", "a b c"), 100, 8))


def test_within_tolerance_is_accepted() -> None:
    ready = asyncio.run(prepare(WordTokenizer(), "c", "f", Prompt("p", "a b c d e f g"), 9, 2))
    assert (ready.tokens, ready.target_tokens) == (7, 9)
