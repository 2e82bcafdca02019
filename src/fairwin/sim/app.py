"""``fairwin sim``: an OpenAI-compatible HTTP server with vLLM's metrics, for tests and fault injection.

It answers the endpoints a window uses (``/health``, ``/v1/models``, ``/tokenize``,
``/metrics``, streaming ``/v1/completions`` and ``/v1/chat/completions``) with
vLLM's field names and error body shape. Faults, chosen by flag, make it misbehave
in the ways real servers do; see :data:`FAULTS`.
"""

from __future__ import annotations

import socket
from dataclasses import fields

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from fairwin.errors import UsageError
from fairwin.sim.generation import generate
from fairwin.sim.model import SimConfig, SimMetrics, token_id, tokenize
from fairwin.sim.protocol import CONFIG_KEY, METRICS_KEY, SEEN_KEY, chat_prompt, error_response, json_body

FAULTS = {
    "exit-at-start": "exit with status 3 before serving anything",
    "unhealthy": "answer /health with 503 forever",
    "no-metrics": "answer /metrics with 404",
    "non-streaming": "ignore stream=true and answer one JSON body",
    "short-stream": "stop every stream at half its max_tokens, claiming finish_reason=length",
    "no-usage": "never send a usage chunk",
    "drop-connection": "close the connection in the middle of every stream",
    "burst-delivery": "hold every chunk and send the whole stream at its end, as a client starved of CPU reads it",
    "greedy-wrong-token": "at temperature 0, emit a token the model ranks far below the best at position 3",
    "greedy-near-tie": "at temperature 0, the best two tokens at position 3 are nearly tied and the other one wins",
}


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


async def tokenize_handler(request: web.Request) -> web.Response:
    config = request.app[CONFIG_KEY]
    body = await json_body(request)
    try:
        text = chat_prompt(body["messages"]) if "messages" in body else str(body["prompt"])
    except (KeyError, TypeError, ValueError) as exc:
        return error_response(400, f"invalid tokenize request: {exc}")
    pieces = tokenize(text)
    return web.json_response(
        {"count": len(pieces), "max_model_len": config.max_model_len, "tokens": [token_id(p) for p in pieces]}
    )


async def completions(request: web.Request) -> web.StreamResponse:
    return await generate(request, "completions")


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await generate(request, "chat")


@web.middleware
async def require_key(request: web.Request, handler: Handler) -> web.StreamResponse:
    """vLLM's --api-key: every /v1 path needs ``Authorization: Bearer KEY``; /health, /metrics, /tokenize do not."""
    key = request.app[CONFIG_KEY].api_key
    if key is not None and request.path.startswith("/v1") and request.headers.get("Authorization") != f"Bearer {key}":
        return web.json_response({"error": "Unauthorized"}, status=401)
    return await handler(request)


def build_app(config: SimConfig) -> web.Application:
    app = web.Application(middlewares=[require_key])
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
    # The port is bound before anything is printed: a sim that could not listen never says it serves.
    try:
        sock = socket.create_server((host, port))
    except OSError as exc:  # a port already held: one line, as a server says it, never a traceback
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port") from None
    # Its changed settings, each value as given, the way vLLM logged "non-default args" (the API key included,
    # until vllm#52523 redacted it in 2026): a server's log may hold a secret, and fairwin must keep it out of a window.
    default = SimConfig()
    changed = {
        f.name: getattr(config, f.name) for f in fields(config) if getattr(config, f.name) != getattr(default, f.name)
    }
    print(f"fairwin sim: non-default args: {changed}", flush=True)
    # One line, as a server logs its start (flushed: a log read through a pipe or SSH sees it at once).
    print(f"fairwin sim: serving {config.model} on http://{host}:{port}", flush=True)
    web.run_app(build_app(config), sock=sock, print=None, access_log=None)
