"""``fairwin sim``: an OpenAI-compatible HTTP server with vLLM's metrics, for tests and fault injection.

It answers the endpoints a window uses (``/health``, ``/v1/models``, ``/tokenize``,
``/metrics``, streaming ``/v1/completions`` and ``/v1/chat/completions``) with
vLLM's field names and error body shape. Faults, chosen by flag, make it misbehave
in the ways real servers do; see :data:`FAULTS`.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from fairwin.sim.model import Drafter, SimConfig, SimMetrics, token_id, tokenize

FAULTS = {
    "exit-at-start": "exit with status 3 before serving anything",
    "unhealthy": "answer /health with 503 forever",
    "no-metrics": "answer /metrics with 404",
    "non-streaming": "ignore stream=true and answer one JSON body",
    "short-stream": "stop every stream at half its max_tokens, claiming finish_reason=length",
    "no-usage": "never send a usage chunk",
    "drop-connection": "close the connection in the middle of every stream",
    "burst-delivery": "hold every chunk and send the whole stream at its end, as a client starved of CPU reads it",
}
SPEC_LOGIT_BIAS_MESSAGE = (
    "The min_p and logit_bias sampling parameters are not yet supported with speculative decoding."
)
SALT_MESSAGE = (
    "Parameter 'cache_salt' must be at most 128 characters and must not contain '@', '/', '\\\\', or NUL. "
    "(parameter=cache_salt)"
)
CONFIG_KEY: web.AppKey[SimConfig] = web.AppKey("config", SimConfig)
METRICS_KEY: web.AppKey[SimMetrics] = web.AppKey("metrics", SimMetrics)
SEEN_KEY: web.AppKey[set[str]] = web.AppKey("seen_prefixes", set)


def error_response(status: int, message: str, kind: str = "BadRequestError") -> web.Response:
    """vLLM's error body: {"error": {"message", "type", "param", "code"}}."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return web.json_response(body, status=status)


def chat_prompt(messages: Any) -> str:
    if not isinstance(messages, list):
        raise ValueError("messages must be a list")
    text = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
    return text + "assistant: "


async def health(request: web.Request) -> web.Response:
    if "unhealthy" in request.app[CONFIG_KEY].faults:
        return web.Response(status=503, text="unhealthy (injected fault)")
    return web.Response(text="")


async def models(request: web.Request) -> web.Response:
    model = request.app[CONFIG_KEY].model
    return web.json_response({"object": "list", "data": [{"id": model, "object": "model", "owned_by": "fairwin"}]})


async def metrics(request: web.Request) -> web.Response:
    if "no-metrics" in request.app[CONFIG_KEY].faults:
        return web.Response(status=404, text="Not Found")
    body = generate_latest(request.app[METRICS_KEY].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except json.JSONDecodeError:
        raise web.HTTPBadRequest(text="body is not JSON") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="body must be a JSON object")
    return body


async def tokenize_handler(request: web.Request) -> web.Response:
    config = request.app[CONFIG_KEY]
    body = await _json_body(request)
    try:
        text = chat_prompt(body["messages"]) if "messages" in body else str(body["prompt"])
    except (KeyError, TypeError, ValueError) as exc:
        return error_response(400, f"invalid tokenize request: {exc}")
    pieces = tokenize(text)
    return web.json_response(
        {"count": len(pieces), "max_model_len": config.max_model_len, "tokens": [token_id(p) for p in pieces]}
    )


async def _refuse_in_stream(request: web.Request, message: str) -> web.StreamResponse:
    """vLLM refuses some streaming requests after the stream began: HTTP 200, then an error event."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    error = {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}
    await response.write(f"data: {json.dumps(error)}\n\ndata: [DONE]\n\n".encode())
    await response.write_eof()
    return response


def _validate(config: SimConfig, body: dict[str, Any]) -> web.Response | None:
    if body.get("model") != config.model:
        return error_response(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
    if config.spec_tokens > 0 and body.get("logit_bias") and not body.get("stream"):
        return error_response(400, SPEC_LOGIT_BIAS_MESSAGE)
    for param in sorted(config.reject_params):
        if param in body:
            return error_response(400, f"{param} is not supported by this server (injected fault)")
    salt = body.get("cache_salt")
    if salt is not None and (len(str(salt)) > 128 or set("@/\\\0").intersection(str(salt))):
        return error_response(400, SALT_MESSAGE)
    max_tokens = body.get("max_tokens", 16)
    if not isinstance(max_tokens, int) or max_tokens < 1:
        return error_response(400, f"max_tokens must be a positive integer, got {max_tokens!r}")
    return None


def _chunk(kind: str, rid: str, model: str, text: str | None, finish: str | None) -> dict[str, Any]:
    if kind == "chat":
        delta = {"content": text} if text is not None else {}
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
        obj = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": text or "", "finish_reason": finish}
        obj = "text_completion"
    return {"id": rid, "object": obj, "created": int(time.time()), "model": model, "choices": [choice]}


async def generate(request: web.Request, kind: str) -> web.StreamResponse:
    config, counters = request.app[CONFIG_KEY], request.app[METRICS_KEY]
    body = await _json_body(request)
    refusal = _validate(config, body)
    if refusal is not None:
        return refusal
    if config.spec_tokens > 0 and body.get("logit_bias"):
        return await _refuse_in_stream(request, SPEC_LOGIT_BIAS_MESSAGE)
    arrived = time.monotonic()
    try:
        prompt = chat_prompt(body["messages"]) if kind == "chat" else str(body["prompt"])
    except (KeyError, TypeError, ValueError) as exc:
        return error_response(400, f"invalid request: {exc}")
    prompt_tokens = len(tokenize(prompt))
    max_tokens: int = body.get("max_tokens", 16)
    drafter = Drafter(config, int(body.get("seed") or 0), prompt)
    if not body.get("ignore_eos", False):
        max_tokens = min(max_tokens, 1 + int(drafter.rng.expovariate(1 / 200)))  # an EOS, as a model would
    target = max_tokens // 2 if "short-stream" in config.faults else max_tokens
    streaming = bool(body.get("stream")) and "non-streaming" not in config.faults
    include_usage = bool((body.get("stream_options") or {}).get("include_usage")) and "no-usage" not in config.faults

    labels = counters.labels
    salted = f"{body.get('cache_salt', '')}\x00{prompt}"
    counters.prefix_queries.labels(**labels).inc(prompt_tokens)
    if salted in request.app[SEEN_KEY]:
        counters.prefix_hits.labels(**labels).inc(prompt_tokens)
    request.app[SEEN_KEY].add(salted)
    counters.prompt_tokens.labels(**labels).inc(prompt_tokens)

    rid = f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{uuid.uuid4().hex[:16]}"
    response: web.StreamResponse | None = None
    if streaming:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)

    held: list[bytes] = []

    async def send(payload: dict[str, Any]) -> None:
        if response is None:
            return
        data = f"data: {json.dumps(payload)}\n\n".encode()
        if "burst-delivery" in config.faults:
            held.append(data)
        else:
            await response.write(data)

    # Sleep to a schedule, not by increments, so decode time matches the model despite timer slack.
    clock = arrived + prompt_tokens * config.prefill_ms_per_token / 1000.0
    await asyncio.sleep(max(0.0, clock - time.monotonic()))
    pieces = [drafter.text(1)]
    emitted = 1
    first_at = time.monotonic()
    counters.ttft.labels(**labels).observe(first_at - arrived)
    counters.generation_tokens.labels(**labels).inc(1)
    await send(_chunk(kind, rid, config.model, pieces[0], None))
    rounds = 0
    while emitted < target:
        if "drop-connection" in config.faults and rounds == 2 and request.transport is not None:
            request.transport.close()
            return response or web.Response(status=500)
        step = drafter.next_round(target - emitted)
        clock += step.seconds
        await asyncio.sleep(max(0.0, clock - time.monotonic()))
        produced = 1 + step.accepted
        if step.proposed:
            counters.drafts.labels(**labels).inc()
            counters.draft_tokens.labels(**labels).inc(step.proposed)
            counters.accepted.labels(**labels).inc(step.accepted)
            for position in range(step.accepted):
                counters.accepted_per_pos.labels(**labels, position=str(position)).inc()
        counters.generation_tokens.labels(**labels).inc(produced)
        emitted += produced
        rounds += 1
        text = drafter.text(produced)
        pieces.append(text)
        if emitted < target:
            await send(_chunk(kind, rid, config.model, text, None))
    finish = "length" if emitted >= max_tokens or "short-stream" in config.faults else "stop"
    decode_s = time.monotonic() - first_at
    counters.decode_time.labels(**labels).observe(decode_s)
    counters.request_success.labels(**labels, finished_reason=finish).inc()
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": emitted,
        "total_tokens": prompt_tokens + emitted,
    }
    if response is None:
        choice: dict[str, Any]
        if kind == "chat":
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(pieces)},
                "finish_reason": finish,
            }
        else:
            choice = {"index": 0, "text": "".join(pieces), "finish_reason": finish}
        return web.json_response(
            {"id": rid, "object": kind, "model": config.model, "choices": [choice], "usage": usage}
        )
    await send(_chunk(kind, rid, config.model, pieces[-1] if rounds else None, finish))
    if include_usage:
        final: dict[str, Any] = {"id": rid, "object": "usage", "model": config.model, "choices": [], "usage": usage}
        if config.per_request_metrics:  # vLLM's field names; generation_time_ms is first to last token
            final["metrics"] = {
                "time_to_first_token_ms": 1000.0 * (first_at - arrived),
                "generation_time_ms": 1000.0 * decode_s,
                "queue_time_ms": 0.0,
            }
        await send(final)
    for data in held:
        await response.write(data)
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def completions(request: web.Request) -> web.StreamResponse:
    return await generate(request, "completions")


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await generate(request, "chat")


def build_app(config: SimConfig) -> web.Application:
    app = web.Application()
    app[CONFIG_KEY] = config
    app[METRICS_KEY] = SimMetrics(config.model, speculative=config.spec_tokens > 0)
    app[SEEN_KEY] = set()
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/tokenize", tokenize_handler)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    return app


def serve(config: SimConfig, host: str, port: int) -> None:
    if "exit-at-start" in config.faults:
        raise SystemExit(3)
    web.run_app(build_app(config), host=host, port=port, print=None, access_log=None)
