"""One completion request in ``fairwin sim``: prefill, decode rounds on a schedule, chunks out, counters up.

Time follows a schedule (prefill, then each round's modelled seconds) and the server
sleeps *to* each point of it rather than *for* each step, so the stream keeps the
model's pace despite timer slack. The counters are vLLM's, incremented as vLLM would.
What they say a request took is, under ``--clock model`` (the default), the schedule's
own seconds: a starved machine delays the chunks, never the server's account of them,
so a verdict decided on the counters does not depend on how busy the machine was.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from fairwin.sim.model import Drafter, SimConfig, SimMetrics, tokenize
from fairwin.sim.protocol import (
    CONFIG_KEY,
    METRICS_KEY,
    SEEN_KEY,
    SPEC_LOGIT_BIAS_MESSAGE,
    chat_prompt,
    error_response,
    json_body,
    refuse_in_stream,
    validate,
)


def _chunk(kind: str, rid: str, model: str, text: str | None, finish: str | None) -> dict[str, Any]:
    if kind == "chat":
        delta = {"content": text} if text is not None else {}
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
        obj = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": text or "", "finish_reason": finish}
        obj = "text_completion"
    if finish is not None:
        choice["stop_reason"] = None  # vLLM's: a matched stop string or token id; None for the EOS and for length
    return {"id": rid, "object": obj, "created": int(time.time()), "model": model, "choices": [choice]}


@dataclass
class _Generation:
    """What one request asked for and what it has produced so far."""

    kind: str  # "completions" | "chat"
    config: SimConfig
    counters: SimMetrics
    body: dict[str, Any]
    prompt_tokens: int
    max_tokens: int  # tokens it may write: the request's, or fewer where an end-of-sequence token comes first
    requested: int  # the request's max_tokens: reaching it is finish_reason "length", stopping before it "stop"
    target: int  # tokens it will produce (half of max_tokens under the short-stream fault)
    drafter: Drafter
    arrived: float
    rid: str
    response: web.StreamResponse | None = None
    held: list[bytes] = field(default_factory=list)  # burst-delivery: every chunk, sent at the end
    pieces: list[str] = field(default_factory=list)
    emitted: int = 0
    rounds: int = 0
    first_at: float = 0.0
    modelled_ttft_s: float = 0.0
    modelled_decode_s: float = 0.0

    @property
    def labels(self) -> dict[str, str]:
        return self.counters.labels

    async def send(self, payload: dict[str, Any]) -> None:
        if self.response is None:
            return
        data = f"data: {json.dumps(payload)}\n\n".encode()
        if "burst-delivery" in self.config.faults:
            self.held.append(data)
        else:
            await self.response.write(data)

    async def chunk(self, text: str | None, finish: str | None) -> None:
        await self.send(_chunk(self.kind, self.rid, self.config.model, text, finish))

    async def first_token(self) -> float:
        """Prefill on the schedule, then the first token; returns the schedule's clock."""
        self.modelled_ttft_s = self.prompt_tokens * self.config.prefill_ms_per_token / 1000.0
        clock = self.arrived + self.modelled_ttft_s
        await asyncio.sleep(max(0.0, clock - time.monotonic()))
        self.pieces.append(self.drafter.text(1))
        self.emitted = 1
        self.first_at = time.monotonic()
        self.counters.ttft.labels(**self.labels).observe(self.ttft_s())
        self.counters.generation_tokens.labels(**self.labels).inc(1)
        await self.chunk(self.pieces[0], None)
        return clock

    async def decode(self, clock: float, request: web.Request) -> bool:
        """Decode rounds until the target; False when the connection was dropped (injected fault)."""
        while self.emitted < self.target:
            if "drop-connection" in self.config.faults and self.rounds == 2 and request.transport is not None:
                request.transport.close()
                return False
            step = self.drafter.next_round(self.target - self.emitted)
            clock += step.seconds
            self.modelled_decode_s += step.seconds
            await asyncio.sleep(max(0.0, clock - time.monotonic()))
            self._count_round(step.proposed, step.accepted)
            produced = 1 + step.accepted
            self.emitted += produced
            self.rounds += 1
            self.pieces.append(self.drafter.text(produced))
            if self.emitted < self.target:
                await self.chunk(self.pieces[-1], None)
        return True

    def ttft_s(self) -> float:
        """Arrival to first token, on the server's clock (``SimConfig.clock``)."""
        return self.modelled_ttft_s if self.config.clock == "model" else self.first_at - self.arrived

    def decode_s(self) -> float:
        """First to last token, on the server's clock (``SimConfig.clock``)."""
        return self.modelled_decode_s if self.config.clock == "model" else time.monotonic() - self.first_at

    def _count_round(self, proposed: int, accepted: int) -> None:
        counters = self.counters
        if proposed:
            counters.drafts.labels(**self.labels).inc()
            counters.draft_tokens.labels(**self.labels).inc(proposed)
            counters.accepted.labels(**self.labels).inc(accepted)
            for position in range(accepted):
                counters.accepted_per_pos.labels(**self.labels, position=str(position)).inc()
        counters.generation_tokens.labels(**self.labels).inc(1 + accepted)

    def finish(self) -> tuple[str, float, dict[str, int]]:
        """The finish reason, decode seconds and usage, counted as a finished request."""
        finish = "length" if self.emitted >= self.requested or "short-stream" in self.config.faults else "stop"
        decode_s = self.decode_s()
        self.counters.decode_time.labels(**self.labels).observe(decode_s)
        self.counters.request_success.labels(**self.labels, finished_reason=finish).inc()
        usage = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.emitted,
            "total_tokens": self.prompt_tokens + self.emitted,
        }
        return finish, decode_s, usage

    def whole_body(self, finish: str, usage: dict[str, int]) -> web.Response:
        """The answer when not streaming: one JSON body."""
        text = "".join(self.pieces)
        choice: dict[str, Any] = (
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
            if self.kind == "chat"
            else {"index": 0, "text": text, "finish_reason": finish, "logprobs": self._logprobs()}
        )
        return web.json_response(
            {"id": self.rid, "object": self.kind, "model": self.config.model, "choices": [choice], "usage": usage}
        )

    def _logprobs(self) -> dict[str, Any] | None:
        """The completions API's logprobs, when asked for (``logprobs: N``, at most the top two here)."""
        asked = self.body.get("logprobs")
        if not isinstance(asked, int) or isinstance(asked, bool):
            return None
        words, top = self.drafter.words, self.drafter.top
        chosen = [dict(pair).get(word, -9.0) for word, pair in zip(words, top, strict=True)]
        offsets = [sum(len(w) for w in words[:i]) for i in range(len(words))]
        return {
            "tokens": words,
            "token_logprobs": chosen,
            "top_logprobs": [dict(pair[:asked]) for pair in top],
            "text_offset": offsets,
        }

    async def end_stream(self, finish: str, decode_s: float, usage: dict[str, int], include_usage: bool) -> None:
        assert self.response is not None
        await self.chunk(self.pieces[-1] if self.rounds else None, finish)
        if include_usage:
            final: dict[str, Any] = {
                "id": self.rid,
                "object": "usage",
                "model": self.config.model,
                "choices": [],
                "usage": usage,
            }
            if self.config.per_request_metrics:  # vLLM's field names; generation_time_ms is first to last token
                final["metrics"] = {
                    "time_to_first_token_ms": 1000.0 * self.ttft_s(),
                    "generation_time_ms": 1000.0 * decode_s,
                    "queue_time_ms": 0.0,
                }
            await self.send(final)
        for data in self.held:
            await self.response.write(data)
        await self.response.write(b"data: [DONE]\n\n")
        await self.response.write_eof()


def _count_prompt(request: web.Request, body: dict[str, Any], prompt: str, prompt_tokens: int) -> None:
    """Prompt and prefix-cache counters: a prompt seen before under the same cache salt is a hit."""
    counters = request.app[METRICS_KEY]
    labels = counters.labels
    salted = f"{body.get('cache_salt', '')}\x00{prompt}"
    counters.prefix_queries.labels(**labels).inc(prompt_tokens)
    if salted in request.app[SEEN_KEY]:
        counters.prefix_hits.labels(**labels).inc(prompt_tokens)
    request.app[SEEN_KEY].add(salted)
    counters.prompt_tokens.labels(**labels).inc(prompt_tokens)


def _start(request: web.Request, kind: str, body: dict[str, Any], prompt: str) -> _Generation:
    config = request.app[CONFIG_KEY]
    max_tokens: int = body.get("max_tokens", 16)
    drafter = Drafter(config, int(body.get("seed") or 0), prompt, greedy=body.get("temperature") == 0)
    requested = max_tokens
    if not body.get("ignore_eos", False):
        max_tokens = min(max_tokens, 1 + int(drafter.rng.expovariate(1 / 200)))  # an EOS, as a model would
        if body.get("allowed_token_ids") == [config.eos_token_id]:
            max_tokens = 1  # the only token it may write is the end of sequence
    prompt_tokens = len(tokenize(prompt))
    _count_prompt(request, body, prompt, prompt_tokens)
    return _Generation(
        kind=kind,
        config=config,
        counters=request.app[METRICS_KEY],
        body=body,
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        requested=requested,
        target=max_tokens // 2 if "short-stream" in config.faults else max_tokens,
        drafter=drafter,
        arrived=time.monotonic(),
        rid=f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{uuid.uuid4().hex[:16]}",
    )


async def generate(request: web.Request, kind: str) -> web.StreamResponse:
    config = request.app[CONFIG_KEY]
    body = await json_body(request)
    refusal = validate(config, body)
    if refusal is not None:
        return refusal
    if config.spec_tokens > 0 and body.get("logit_bias"):
        return await refuse_in_stream(request, SPEC_LOGIT_BIAS_MESSAGE)
    try:
        prompt = chat_prompt(body["messages"]) if kind == "chat" else str(body["prompt"])
    except (KeyError, TypeError, ValueError) as exc:
        return error_response(400, f"invalid request: {exc}")
    run = _start(request, kind, body, prompt)
    if body.get("stream") and "non-streaming" not in config.faults:
        run.response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await run.response.prepare(request)
    clock = await run.first_token()
    if not await run.decode(clock, request):
        return run.response or web.Response(status=500)
    finish, decode_s, usage = run.finish()
    if run.response is None:
        return run.whole_body(finish, usage)
    include_usage = bool((body.get("stream_options") or {}).get("include_usage")) and "no-usage" not in config.faults
    await run.end_stream(finish, decode_s, usage, include_usage)
    return run.response
