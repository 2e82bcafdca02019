"""The sim's counters under a stall: on its model's clock they do not move; on the wall clock they do.

The stall is real: the test blocks the one event loop that serves the sim, as a machine
starved of CPU would, in the middle of a stream.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Literal

import pytest
from aiohttp.test_utils import TestClient, TestServer

from fairwin.metrics.scrape import parse_snapshot
from fairwin.sim.app import build_app
from fairwin.sim.model import SimConfig

STALL_S = 0.25
TOKENS = 20


async def stalled_stream(config: SimConfig) -> tuple[dict[str, float], dict[str, float]]:
    """One streamed request with the loop blocked for STALL_S after its first chunk: (counters, per-request metrics)."""
    async with TestClient(TestServer(build_app(config))) as client:
        body = {
            "model": "m",
            "prompt": "one two three",
            "max_tokens": TOKENS,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        response = await client.post("/v1/completions", json=body)
        timing: dict[str, float] = {}
        stalled = False
        async for line in response.content:
            if not line.startswith(b"data: {"):
                continue
            if not stalled:
                time.sleep(STALL_S)  # blocks the server's loop too: the CPU is elsewhere
                stalled = True
            timing = json.loads(line[6:]).get("metrics") or timing
        scraped = parse_snapshot(await (await client.get("/metrics")).text())
    return scraped, timing


def sim(clock: Literal["model", "wall"]) -> SimConfig:
    return SimConfig(
        model="m", ms_per_round=1.0, jitter=0.0, prefill_ms_per_token=0.5, clock=clock, per_request_metrics=True
    )


def test_on_the_model_clock_a_stall_leaves_the_counters_exact() -> None:
    counters, timing = asyncio.run(stalled_stream(sim("model")))
    rounds_s = (TOKENS - 1) * 0.001  # one round a token after the first, 1 ms each, no jitter
    assert counters["vllm:request_decode_time_seconds_sum"] == pytest.approx(rounds_s, rel=1e-9)
    assert counters["vllm:time_to_first_token_seconds_sum"] == pytest.approx(3 * 0.0005, rel=1e-9)  # 3 tokens
    assert timing["generation_time_ms"] == pytest.approx(1000 * rounds_s, rel=1e-9)


def test_on_the_wall_clock_the_stall_is_in_the_counters() -> None:
    counters, timing = asyncio.run(stalled_stream(sim("wall")))
    assert counters["vllm:request_decode_time_seconds_sum"] >= STALL_S
    assert timing["generation_time_ms"] >= 1000 * STALL_S
