from __future__ import annotations

import pytest

from fairwin.client.stream import StreamRecord
from fairwin.errors import MetricsError
from fairwin.pooling.pool import PooledRow, pool_repeat


def stream(first: float, last: float, tokens: int = 9) -> StreamRecord:
    return StreamRecord(
        start="s1",
        role="A",
        cell="c",
        wave="c/r1/f",
        repeat=1,
        family="f",
        stream=0,
        prompt_id="p",
        prompt_tokens_expected=4,
        seed=42,
        cache_salt="x",
        endpoint="completions",
        max_tokens=tokens,
        first_token_s=first,
        last_token_s=last,
        completion_tokens=tokens,
        ok=True,
    )


def wave(
    generation: float, requests: float, accepted: float | None, decode_s: float, drafts: float = 0
) -> dict[str, float]:
    d = {
        "vllm:generation_tokens_total": generation,
        "vllm:request_decode_time_seconds_count": requests,
        "vllm:request_decode_time_seconds_sum": decode_s,
    }
    if accepted is not None:
        d["vllm:spec_decode_num_accepted_tokens_total"] = accepted
        d["vllm:spec_decode_num_drafts_total"] = drafts
    return d


def pooled(deltas: list[dict[str, float]], streams: list[StreamRecord], start: str = "s1") -> PooledRow:
    kind, role = ("candidate", "B") if start == "s2" else ("control", "A")
    return pool_repeat(
        window_id="w", start=start, kind=kind, role=role, cell="c", repeat=1, deltas=deltas, streams=streams
    )


def test_pooling_is_a_ratio_of_sums_by_hand() -> None:
    # Wave 1: 2 requests, 18 tokens, 8 accepted -> steps 8 in 0.2 s.
    # Wave 2: 2 requests, 18 tokens, 0 accepted -> steps 16 in 0.8 s.
    row = pooled(
        [wave(18, 2, 8, 0.2, drafts=6), wave(18, 2, 0, 0.8, drafts=0)],
        [stream(0.1, 0.5), stream(0.1, 0.3), stream(0.2, 0.6), stream(0.1, 0.5)],
        start="s2",
    )
    assert row.first_tokens == 4
    assert row.accepted_tokens == 8
    assert row.decode_steps == row.rounds == 36 - 4 - 8 == 24
    assert row.drafts == 6  # recorded beside, never used as rounds
    assert row.decode_s == pytest.approx(1.0)
    assert row.pooled_rate_tps == pytest.approx((24 + 8) / 1.0)
    # The mean of the two waves' rates would be (16/0.2 + 16/0.8) / 2 = 50: not what pooling does.
    assert row.pooled_rate_tps != pytest.approx(50.0)
    assert row.accepted_per_round == pytest.approx(8 / 24)
    assert row.ms_per_round == pytest.approx(1000 * 1.0 / 24)
    assert row.ttft_s == pytest.approx((0.1 + 0.1 + 0.2 + 0.1) / 4)
    assert row.client_decode_tokens == 4 * 8
    assert row.client_decode_s == pytest.approx(0.4 + 0.2 + 0.4 + 0.4)
    assert row.decode_tps == pytest.approx((4 * 8) / (0.4 + 0.2 + 0.4 + 0.4))


def test_server_without_speculative_counters() -> None:
    row = pooled([wave(18, 2, None, 0.4)], [stream(0.1, 0.3), stream(0.1, 0.3)])
    assert row.accepted_tokens == 0
    assert row.rounds == 16
    assert row.accepted_per_round == 0
    assert row.pooled_rate_tps == pytest.approx(40.0)


def test_missing_counters_refuse() -> None:
    with pytest.raises(MetricsError, match="exposes no vllm:request_decode_time_seconds_sum"):
        pooled([{"vllm:generation_tokens_total": 9, "vllm:request_decode_time_seconds_count": 1}], [stream(0.1, 0.2)])


def test_foreign_requests_refuse() -> None:
    with pytest.raises(MetricsError, match="counted 3 requests, the client sent 2"):
        pooled([wave(27, 3, 0, 0.5)], [stream(0.1, 0.2), stream(0.1, 0.2)])
