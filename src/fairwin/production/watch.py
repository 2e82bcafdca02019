"""The watch after a restore: production healthy for ``watch_s`` seconds, answering real tiny requests.

A health path can answer 200 while the model cannot serve, so the watch also sends
``watch_requests`` real completions (at most 8 tokens each) spread over the watch, and
each must come back 200 with text. The health path is polled every second throughout.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import aiohttp

from fairwin.directory.status import WatchRecord
from fairwin.production.control import Production

HEALTH_EVERY_S = 1.0
REQUEST_TIMEOUT_S = 60.0
PROMPT = "Reply with one word: ready"


@dataclass
class WatchResult:
    seconds: float = 0.0
    health_checks: int = 0
    health_failures: int = 0
    requests: int = 0
    answered: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def record(self) -> WatchRecord:
        return WatchRecord(
            ok=self.ok,
            seconds=round(self.seconds, 3),
            health_checks=self.health_checks,
            health_failures=self.health_failures,
            requests=self.requests,
            answered=self.answered,
            problems=self.problems,
        )

    def summary(self) -> str:
        state = "held" if self.ok else f"FAILED ({'; '.join(self.problems)})"
        return (
            f"watch {state}: healthy {self.health_checks - self.health_failures} of {self.health_checks} checks "
            f"over {self.seconds:.1f} s, {self.answered} of {self.requests} requests answered"
        )


async def _one_request(session: aiohttp.ClientSession, production: Production, number: int) -> str | None:
    """None when answered; else why not."""
    body = {
        "model": production.model,
        "prompt": PROMPT,
        "max_tokens": production.settings.watch_max_tokens,
        "temperature": 0.0,
    }
    try:
        async with session.post(
            production.base_url + "/v1/completions", json=body, timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
        ) as response:
            text = await response.text()
            if response.status != 200:
                return f"request {number}: HTTP {response.status}: {text[:200]}"
            payload = await response.json(content_type=None)
    except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
        return f"request {number}: {type(exc).__name__}: {exc}"
    choices = payload.get("choices") if isinstance(payload, dict) else None
    if not choices or not isinstance(choices[0], dict) or "text" not in choices[0]:
        return f"request {number}: no completion in the answer"
    return None


async def watch(production: Production, session: aiohttp.ClientSession) -> WatchResult:
    settings = production.settings
    result = WatchResult()
    started = time.monotonic()
    # Requests go at even times over the watch (all at once when the watch has no length).
    due = [started + settings.watch_s * i / max(settings.watch_requests, 1) for i in range(settings.watch_requests)]
    next_health = started
    while True:
        now = time.monotonic()
        if now >= next_health:
            result.health_checks += 1
            if not await production.healthy(session):
                result.health_failures += 1
                result.problems.append(f"{production.health_url} not healthy at +{now - started:.1f} s")
            next_health = now + HEALTH_EVERY_S
        while due and time.monotonic() >= due[0]:
            due.pop(0)
            result.requests += 1
            problem = await _one_request(session, production, result.requests)
            result.answered += problem is None
            if problem is not None:
                result.problems.append(problem)
        if not due and time.monotonic() - started >= settings.watch_s:
            break
        await asyncio.sleep(min(0.1, max(0.0, next_health - time.monotonic())))
    result.seconds = time.monotonic() - started
    return result
