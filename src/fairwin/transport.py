"""The one place fairwin turns HTTP failures into errors.

Every non-2xx answer is logged and raised *with the server's body*: a bare status
code hides the reason (vLLM's 400 for ``logit_bias`` under speculation says exactly
what is wrong). Connection failures and timeouts become :class:`TransportError`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import aiohttp
from pydantic import JsonValue

from fairwin.errors import HTTPStatusError, TransportError
from fairwin.redaction import secret_from_env

log = logging.getLogger("fairwin.http")
log.setLevel(logging.WARNING)  # always emitted; where it goes (a window's log, stderr with -v) is the caller's

#: How much of an error body goes into the one-line message (all of it goes to the log).
BODY_IN_MESSAGE = 300


def status_error(what: str, url: str, status: int, body: str) -> HTTPStatusError:
    log.warning("%s: HTTP %s from %s: %s", what, status, url, body)
    short = " ".join(body.split())[:BODY_IN_MESSAGE]
    return HTTPStatusError(f"{what}: HTTP {status} from {url}: {short}", status=status, body=body)


def transport_error(what: str, url: str, exc: BaseException) -> TransportError:
    reason = str(exc) or type(exc).__name__
    log.warning("%s: no answer from %s: %s", what, url, reason)
    return TransportError(f"{what}: no answer from {url}: {reason}")


def client_session(timeout: aiohttp.ClientTimeout, headers: dict[str, str] | None = None) -> aiohttp.ClientSession:
    """The session a start's other requests go through: health, counters, tokenizing, probes (``headers``: a
    server's key, from :func:`api_headers`). Its streams travel on
    :class:`fairwin.client.sse_transport.StreamTransport`.

    aiohttp pools at most 100 connections by default and queues every request past
    that inside the client; nothing here should wait on a pool, so it is left unbounded.
    """
    return aiohttp.ClientSession(timeout=timeout, headers=headers, connector=aiohttp.TCPConnector(limit=0))


def api_headers(api_key_env: str | None, where: str) -> dict[str, str]:
    """``Authorization: Bearer $NAME`` for a server that requires a key; the key is remembered as a secret, so
    no file fairwin writes will hold it. ``where`` names the setting in the one-line error."""
    if api_key_env is None:
        return {}
    return {"Authorization": f"Bearer {secret_from_env(api_key_env, where)}"}


async def get_text(session: aiohttp.ClientSession, url: str, *, what: str) -> str:
    try:
        async with session.get(url) as response:
            body = await response.text()
            if response.status >= 300:
                raise status_error(what, url, response.status, body)
            return body
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise transport_error(what, url, exc) from None


async def post_json(session: aiohttp.ClientSession, url: str, payload: dict[str, JsonValue], *, what: str) -> Any:
    try:
        async with session.post(url, json=payload) as response:
            body = await response.text()
            if response.status >= 300:
                raise status_error(what, url, response.status, body)
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise transport_error(what, url, exc) from None
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        raise TransportError(f"{what}: {url} answered 2xx with a body that is not JSON: {body[:120]!r}") from None
