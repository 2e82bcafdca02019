"""What every endpoint of ``fairwin sim`` shares: vLLM's error bodies and refusals, request parsing, app state."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from fairwin.sim.model import SimConfig, SimMetrics

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


async def json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except json.JSONDecodeError:
        raise web.HTTPBadRequest(text="body is not JSON") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="body must be a JSON object")
    return body


async def refuse_in_stream(request: web.Request, message: str) -> web.StreamResponse:
    """vLLM refuses some streaming requests after the stream began: HTTP 200, then an error event."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    error = {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}
    await response.write(f"data: {json.dumps(error)}\n\ndata: [DONE]\n\n".encode())
    await response.write_eof()
    return response


def validate(config: SimConfig, body: dict[str, Any]) -> web.Response | None:
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
