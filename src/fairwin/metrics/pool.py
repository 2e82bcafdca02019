"""Pooling a repeat's waves into one row of rates: a ratio of sums, never a mean of ratios.

Decode steps (rounds) come from generation tokens, not from vLLM's draft counter:
every request's first token comes from prefill, and every decode step emits one
token plus whatever drafts it accepted, so

    decode_steps = generation_tokens - first_tokens - accepted_tokens.

vLLM counts a *draft* only when a proposal was made (an n-gram step with no match
proposes nothing and is not counted), so ``drafts`` can undercount the rounds the
server really ran. Both are recorded; ``rounds`` is the decode-step count. A server
without speculative counters has accepted = 0 and rounds = decode steps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from fairwin.decision.inputs import POOLED_FORMAT
from fairwin.errors import MetricsError
from fairwin.load.stream import StreamRecord
from fairwin.metrics.fidelity import trusted
from fairwin.metrics.scrape import Snapshot

GENERATION = "vllm:generation_tokens_total"
DECODE_SUM = "vllm:request_decode_time_seconds_sum"
DECODE_COUNT = "vllm:request_decode_time_seconds_count"
DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_HITS = "vllm:prefix_cache_hits_total"
REQUIRED = (GENERATION, DECODE_SUM, DECODE_COUNT)


class PooledRow(BaseModel):
    """One start x cell x repeat; the decision's input."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: str = POOLED_FORMAT
    window_id: str
    start: str
    kind: str  # control | candidate
    role: str
    cell: str
    repeat: int
    waves: int
    streams: int
    # Server counter sums over the repeat's waves.
    generation_tokens: float
    first_tokens: float
    accepted_tokens: float
    drafts: float
    draft_tokens: float
    decode_steps: float
    rounds: float
    decode_s: float
    prefix_cache_hits: float | None
    # Ratios of those sums.
    pooled_rate_tps: float
    accepted_per_round: float
    ms_per_round: float
    # Client side, over the repeat's trusted streams: tokens after the first, and first-to-last-token seconds.
    client_decode_tokens: float
    client_decode_s: float
    ttft_s: float | None  # None: too few streams' client timing could be trusted (client_problem says why)
    decode_tps: float | None  # client_decode_tokens / client_decode_s; None when unobserved
    client_streams: int | None = None  # streams whose client timing pooled (None: written before the rule)
    client_problem: str | None = None
    # The server's own per-request decode seconds over the same (pooled) streams, when it reported them.
    server_stream_decode_s: float | None = None
    # Validity inputs: None means "not observed" (no GPU telemetry for this start).
    clock_cap_mhz: float | None = None
    thermal_events: int | None = None


def decode_rate(deltas: Snapshot) -> float | None:
    """Tokens after each request's first, per decode second: the pooled rate, from one set of deltas.

    (rounds + accepted) / decode seconds, with rounds = generation - first - accepted, is
    (generation - first) / decode seconds. None when the deltas hold no decode time.
    """
    decode_s = deltas.get(DECODE_SUM, 0.0)
    if decode_s <= 0 or GENERATION not in deltas:
        return None
    return (deltas[GENERATION] - deltas.get(DECODE_COUNT, 0.0)) / decode_s


def sum_deltas(deltas: Iterable[Snapshot]) -> Snapshot:
    total: Snapshot = {}
    for one in deltas:
        for key, value in one.items():
            total[key] = total.get(key, 0.0) + value
    return total


def pool_repeat(
    *,
    window_id: str,
    start: str,
    kind: str,
    role: str,
    cell: str,
    repeat: int,
    deltas: Sequence[Snapshot],
    streams: Sequence[StreamRecord],
) -> PooledRow:
    total = sum_deltas(deltas)
    missing = [key for key in REQUIRED if key not in total]
    if missing:
        raise MetricsError(
            f"{start} {cell} repeat {repeat}: the server exposes no {', '.join(missing)}; fairwin pools vLLM's "
            "server counters, so the server must expose them"
        )
    generation = total[GENERATION]
    first = total[DECODE_COUNT]
    accepted = total.get(ACCEPTED, 0.0)
    steps = generation - first - accepted
    decode_s = total[DECODE_SUM]
    if steps <= 0 or decode_s <= 0:
        raise MetricsError(
            f"{start} {cell} repeat {repeat}: counters show {steps:g} decode steps in {decode_s:g} s; "
            "a repeat needs max_tokens >= 2 and a server that counts decode time"
        )
    if first != len(streams):
        raise MetricsError(
            f"{start} {cell} repeat {repeat}: the server counted {first:g} requests, the client sent "
            f"{len(streams)}; something else is using this server"
        )
    kept, client_problem = trusted(streams)
    pooled = kept if client_problem is None else []
    server_each = [s.server_decode_s for s in pooled]
    return PooledRow(
        window_id=window_id,
        start=start,
        kind=kind,
        role=role,
        cell=cell,
        repeat=repeat,
        waves=len(deltas),
        streams=len(streams),
        generation_tokens=generation,
        first_tokens=first,
        accepted_tokens=accepted,
        drafts=total.get(DRAFTS, 0.0),
        draft_tokens=total.get(DRAFT_TOKENS, 0.0),
        decode_steps=steps,
        rounds=steps,
        decode_s=decode_s,
        prefix_cache_hits=total.get(PREFIX_HITS),
        pooled_rate_tps=(steps + accepted) / decode_s,
        accepted_per_round=accepted / steps,
        ms_per_round=1000.0 * decode_s / steps,
        **_client_side(pooled),
        client_streams=len(pooled),
        client_problem=client_problem,
        server_stream_decode_s=sum(s for s in server_each if s is not None)
        if pooled and None not in server_each
        else None,
    )


def _client_side(streams: Sequence[StreamRecord]) -> dict[str, float | None]:
    """The client's sums and rates over the given streams (each passed check_complete: it has a first token)."""
    ttfts = [s.ttft_s for s in streams if s.ttft_s is not None]
    tokens = float(sum((s.completion_tokens or 0) - 1 for s in streams))
    seconds = sum(s.decode_s or 0.0 for s in streams)
    return {
        "client_decode_tokens": tokens,
        "client_decode_s": seconds,
        "ttft_s": sum(ttfts) / len(ttfts) if ttfts else None,
        "decode_tps": tokens / seconds if seconds > 0 else None,
    }
