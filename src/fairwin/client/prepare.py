"""Cut each prompt to its cell's length, counted by the server's own tokenizer.

Only ``/tokenize`` is needed (vLLM's or llama.cpp's shape), so this works for any server that has it: the longest
character prefix whose token count is at most the target is found by bisection
(about log2(len) calls per prompt, done once per window at the first start). The
prepared texts are then frozen in the window directory and reused by every start;
each stream's ``usage.prompt_tokens`` proves later starts saw the same length.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

import aiohttp
from pydantic import ConfigDict, JsonValue

from fairwin.errors import InputError, PromptError
from fairwin.formats import PREPARED_PROMPT, RecordFormat
from fairwin.plan.loading import Prompt
from fairwin.profiles import TokenizeStyle
from fairwin.records import Record
from fairwin.transport import post_json


def prompt_key(family: str, prompt_id: str) -> str:
    """Prompt ids are unique within a family only, so a prepared prompt is found by both."""
    return f"{family}/{prompt_id}"


class PreparedPrompt(Record):
    record_format: ClassVar[RecordFormat] = PREPARED_PROMPT
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["fairwin.prepared-prompt/1"] = "fairwin.prepared-prompt/1"
    cell: str
    family: str
    id: str
    target_tokens: int
    tokens: int
    text: str


def _tokenize_payload(model: str, endpoint: str, text: str) -> dict[str, JsonValue]:
    """vLLM's /tokenize body: a completion's prompt, or a chat's messages with the generation prompt."""
    if endpoint == "chat":
        return {
            "model": model,
            "messages": [{"role": "user", "content": text}],
            "add_generation_prompt": True,
        }
    return {"model": model, "prompt": text}


def _count_in(reply: Any, style: TokenizeStyle) -> int:
    """The token count in a /tokenize reply: vLLM's ``count``, llama.cpp's length of ``tokens``."""
    if style == "llamacpp":
        tokens = reply.get("tokens") if isinstance(reply, dict) else None
        if not isinstance(tokens, list):
            raise TypeError("no 'tokens' list")
        return len(tokens)
    return int(reply["count"])


class TokenCounter(Protocol):
    async def count(self, text: str) -> int: ...


class LocalTokenizer:
    """Counts tokens with a local ``tokenizer.json`` (Hugging Face ``tokenizers``), no server needed.

    Counts the text's own tokens, without special tokens: the count a server reports
    for the same text may be larger by its BOS token.
    """

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer as HFTokenizer

        try:
            self._tokenizer = HFTokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises a bare Exception for a bad file
            raise InputError(f"{path}: not a tokenizer.json that `tokenizers` can load: {exc}") from None
        self._path = path

    async def count(self, text: str) -> int:
        try:
            return len(self._tokenizer.encode(text, add_special_tokens=False).ids)
        except Exception as exc:  # likewise for a text it cannot encode (a word-level vocabulary without [UNK])
            raise InputError(f"{self._path}: this tokenizer cannot encode the prompts' text: {exc}") from None


class TokenizeClient:
    """Counts tokens with a server's /tokenize, caching by text.

    vLLM's takes the request's own shape (``prompt``, or ``messages``). llama.cpp's takes ``content`` and
    counts it as a completion's prompt is counted (``add_special``); a chat is first rendered by the
    server's ``/apply-template``, then counted with its special tokens parsed, as the chat endpoint does.
    """

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        model: str,
        endpoint: str,
        style: TokenizeStyle = "vllm",
    ) -> None:
        self._session = session
        self._base = base_url
        self._url = base_url + "/tokenize"
        self._model = model
        self._endpoint = endpoint
        self._style = style
        self._cache: dict[str, int] = {}

    async def count(self, text: str) -> int:
        if text not in self._cache:
            reply = await post_json(self._session, self._url, await self._payload(text), what="tokenize")
            try:
                self._cache[text] = _count_in(reply, self._style)
            except (KeyError, TypeError, ValueError):
                wanted = "a 'tokens' list" if self._style == "llamacpp" else "a 'count'"
                raise PromptError(f"/tokenize at {self._url} answered without {wanted}: {reply!r:.120}") from None
        return self._cache[text]

    async def _payload(self, text: str) -> dict[str, JsonValue]:
        if self._style == "vllm":
            return _tokenize_payload(self._model, self._endpoint, text)
        if self._endpoint != "chat":
            return {"content": text, "add_special": True}
        rendered = await post_json(
            self._session,
            self._base + "/apply-template",
            {"messages": [{"role": "user", "content": text}]},
            what="apply-template",
        )
        if not isinstance(rendered, dict) or not isinstance(rendered.get("prompt"), str):
            raise PromptError(f"/apply-template at {self._base} answered without a 'prompt': {rendered!r:.120}")
        return {"content": rendered["prompt"], "add_special": True, "parse_special": True}


async def cut_to_tokens(tokenizer: TokenCounter, text: str, target: int) -> tuple[str, int]:
    """The longest prefix of ``text`` with at most ``target`` tokens, and its count."""
    total = await tokenizer.count(text)
    if total <= target:
        return text, total
    low, high = 0, len(text)  # count(text[:low]) <= target < count(text[:high])
    # Start near the proportional guess; bisection makes it exact whatever the guess.
    guess = max(1, min(len(text) - 1, len(text) * target // total))
    if await tokenizer.count(text[:guess]) <= target:
        low = guess
    else:
        high = guess
    while high - low > 1:
        middle = (low + high) // 2
        if await tokenizer.count(text[:middle]) <= target:
            low = middle
        else:
            high = middle
    return text[:low], await tokenizer.count(text[:low])


def length_problem(cell: str, family: str, prompt: Prompt, tokens: int, target: int, tolerance: int) -> str | None:
    """Why a prompt, cut to at most ``target`` tokens, is too short for its cell (None: long enough). The one rule
    for a window's starts and for ``plan check --tokenizer``."""
    if tokens >= target - tolerance:
        return None
    return (
        f"cell {cell}: prompt {family}/{prompt.id} has only {tokens} tokens, the cell wants {target} "
        f"(tolerance {tolerance})"
    )


async def prepare(
    tokenizer: TokenCounter, cell: str, family: str, prompt: Prompt, target: int, tolerance: int
) -> PreparedPrompt:
    text, tokens = await cut_to_tokens(tokenizer, prompt.text, target)
    if problem := length_problem(cell, family, prompt, tokens, target, tolerance):
        raise PromptError(
            f"{problem}; cutting cannot lengthen a prompt: rebuild the family from longer text "
            f"(`fairwin prompts --family {family}=SOURCE --min-chars {target * 6}`), or lower prompt_tokens; "
            "`fairwin plan check --tokenizer FILE` finds every short prompt before a window"
        )
    return PreparedPrompt(cell=cell, family=family, id=prompt.id, target_tokens=target, tokens=tokens, text=text)
