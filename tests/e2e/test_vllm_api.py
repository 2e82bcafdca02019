"""Facts about the real server that fairwin relies on, checked against a running vLLM."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from fairwin.launch.local import LocalServer
from fairwin.launch.spec import make_spec
from fairwin.metrics.scrape import scrape
from fairwin.plan.roles import Role
from fairwin.profiles import VLLM
from tests.e2e.conftest import ROLES, Engine

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def speculative_server(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    directory = tmp_path_factory.mktemp("api")
    server = LocalServer(make_spec("B", {"B": Role.model_validate(ROLES["B"])}, directory), directory / "server.log")
    server.launch()
    try:

        async def healthy() -> None:
            async with aiohttp.ClientSession() as session:
                await server.wait_healthy(session)

        asyncio.run(healthy())
        yield server
    finally:
        assert server.terminate().signal in ("SIGTERM", "SIGKILL")


async def post(url: str, body: dict[str, object]) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as response:
        return response.status, await response.text()


def test_logit_bias_is_refused_with_speculation_on(speculative_server: LocalServer) -> None:
    url = speculative_server.spec.base_url + "/v1/completions"
    status, body = asyncio.run(post(url, {"model": "tiny", "prompt": "a b", "max_tokens": 4, "logit_bias": {"5": 10}}))
    assert status == 400
    error = json.loads(body)["error"]
    assert error["type"] == "BadRequestError"
    assert "logit_bias" in error["message"] and "speculative decoding" in error["message"]
    # Streaming, the same refusal comes as HTTP 200 and an error event: what the rehearsal reads.
    stream_body = {"model": "tiny", "prompt": "a b", "max_tokens": 4, "logit_bias": {"5": 10}, "stream": True}
    status, body = asyncio.run(post(url, stream_body))
    assert status == 200
    assert '"code": 400' in body and "logit_bias" in body


def test_salts_decide_prefix_cache_hits(speculative_server: LocalServer) -> None:
    base = speculative_server.spec.base_url
    prompt = Path(__file__).read_text()[:4000]

    async def hits_after(salts: list[str]) -> float:
        async with aiohttp.ClientSession() as session:
            before = await scrape(session, base, "tiny")
            for salt in salts:
                body = {"model": "tiny", "prompt": prompt, "max_tokens": 2, "cache_salt": salt}
                async with session.post(base + "/v1/completions", json=body) as response:
                    assert response.status == 200, await response.text()
            after = await scrape(session, base, "tiny")
        return after[VLLM.prefix_hits] - before[VLLM.prefix_hits]

    assert asyncio.run(hits_after(["fresh-1", "fresh-2"])) == 0
    assert asyncio.run(hits_after(["same", "same"])) > 0  # proves the counter would have seen a hit


def test_cache_salt_rules(speculative_server: LocalServer) -> None:
    url = speculative_server.spec.base_url + "/v1/completions"
    status, body = asyncio.run(post(url, {"model": "tiny", "prompt": "a", "max_tokens": 2, "cache_salt": "a/b"}))
    assert status == 400 and "cache_salt" in body


def test_rehearsal_passes_against_the_real_server(speculative_server: LocalServer, tmp_path: Path) -> None:
    from tests.e2e.conftest import e2e_plan
    from tests.integration.helpers import fairwin

    plan = e2e_plan(tmp_path / "plan")
    plan.write_text(plan.read_text() + "\n[rehearsal]\nreal_prompts = true\n")  # long-b1 at its 4,096 tokens
    out = tmp_path / "rehearsal"
    # The runbook's rehearsal: every probe at priority 10 (the default), and the terminator probe forcing the
    # model's end-of-sequence token with allowed_token_ids, which a speculative vLLM accepts (logit_bias it refuses).
    eos = json.loads((Path(os.environ["FAIRWIN_TINY_MODEL"]) / "config.json").read_text())["eos_token_id"]
    done = fairwin(
        "rehearse",
        str(plan),
        "--url",
        speculative_server.spec.base_url,
        "--model",
        "tiny",
        "--out",
        str(out),
        "--eos",
        str(eos),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads((out / "rehearsal.json").read_text())
    assert doc["verdict"] == "PASS" and doc["cause_confirmed"]
    control = doc["probes"][-1]
    assert control["name"] == "control logit_bias" and control["status"] == 400
    assert "logit_bias" in control["error_body"]
    long = next(p for p in doc["probes"] if p["name"] == "cell long-b1")
    assert 4096 - 8 <= long["usage"]["prompt_tokens"] <= 4096 + 8, long
    terminator = next(p for p in doc["probes"] if p["name"] == "eos")
    assert (terminator["finish_reason"], terminator["usage"]["completion_tokens"]) == ("stop", 1), terminator
    sent = [json.loads(line)["request"] for line in (out / "responses.jsonl").read_text().splitlines()]
    assert all(body.get("priority") == 10 for body in sent if body and "max_tokens" in body)
