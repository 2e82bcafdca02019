"""Pooling a repeat's waves into one row of rates: a ratio of sums, never a mean of ratios.

Decode steps (rounds) come from generation tokens, not from the engine's draft counter:
every request's first token comes from prefill, and every decode step emits one
token plus whatever drafts it accepted, so

    decode_steps = generation_tokens - first_tokens - accepted_tokens.

vLLM counts a *draft* only when a proposal was made (an n-gram step with no match
proposes nothing and is not counted), so ``drafts`` can undercount the rounds the
server really ran. Both are recorded; ``rounds`` is the decode-step count. A server
without speculative counters has accepted = 0 and rounds = decode steps. A server that
counts no finished requests (llama.cpp) has first_tokens = the repeat's own streams.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fairwin.client.stream import StreamRecord
from fairwin.errors import MetricsError
from fairwin.metrics.scrape import Snapshot
from fairwin.pooling.fidelity import trusted
from fairwin.profiles import VLLM, ServerProfile
from fairwin.rows import SERVER_METRICS, Kind, PooledRow

__all__ = ["PooledRow", "client_rate", "decode_rate", "pool_repeat", "sum_deltas"]


def decode_rate(deltas: Snapshot, profile: ServerProfile = VLLM, streams: int | None = None) -> float | None:
    """Tokens after each request's first, per decode second: the pooled rate, from one set of deltas.

    (rounds + accepted) / decode seconds, with rounds = generation - first - accepted, is
    (generation - first) / decode seconds. First tokens are the server's request count, or (a server that
    counts none) ``streams``, the finished streams the deltas cover. None when the deltas hold no decode time.
    """
    decode_s = deltas.get(profile.decode_sum, 0.0)
    if not profile.reads_counters or decode_s <= 0 or profile.generation not in deltas:
        return None
    first = deltas.get(profile.requests, 0.0) if profile.counts_requests else float(streams or 0)
    return (deltas[profile.generation] - first) / decode_s


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
    kind: Kind,
    role: str,
    cell: str,
    repeat: int,
    deltas: Sequence[Snapshot],
    streams: Sequence[StreamRecord],
    profile: ServerProfile = VLLM,
) -> PooledRow:
    where = f"{start} {cell} repeat {repeat}"
    server = _server_side(where, sum_deltas(deltas), streams, profile)
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
        **server,
        **_client_side(pooled),
        client_streams=len(pooled),
        client_problem=client_problem,
        server_stream_decode_s=sum(s for s in server_each if s is not None)
        if pooled and None not in server_each
        else None,
    )


#: A row's fields that come from the server's counters: the sums, and the metrics made of them.
SERVER_FIELDS = (
    "generation_tokens",
    "first_tokens",
    "accepted_tokens",
    "drafts",
    "draft_tokens",
    "decode_steps",
    "rounds",
    "decode_s",
    "prefix_cache_hits",
    *SERVER_METRICS,
)


def _server_side(
    where: str, total: Snapshot, streams: Sequence[StreamRecord], profile: ServerProfile
) -> dict[str, float | None]:
    """The server's sums and the rates made of them; all None when the profile reads no counters."""
    if not profile.reads_counters:
        return dict.fromkeys(SERVER_FIELDS)
    missing = [key for key in profile.required if key not in total]
    if missing:
        raise MetricsError(
            f"{where}: the server exposes no {', '.join(missing)}; the {profile.name} profile pools those "
            'counters, so the server must expose them (or set window.counters = "none" to measure client-only)'
        )
    generation = total[profile.generation]
    # One first token per finished request: counted by the server where it counts requests, else the
    # repeat's own streams (each finished, or the wave would have failed).
    first = total[profile.requests] if profile.counts_requests else float(len(streams))
    accepted = total.get(profile.accepted, 0.0)
    steps = generation - first - accepted
    decode_s = total[profile.decode_sum]
    if steps <= 0 or decode_s <= 0:
        raise MetricsError(
            f"{where}: counters show {steps:g} decode steps in {decode_s:g} s; "
            "a repeat needs max_tokens >= 2 and a server that counts decode time"
        )
    _check_only_ours(where, generation, first, streams, profile)
    return {
        "generation_tokens": generation,
        "first_tokens": first,
        "accepted_tokens": accepted,
        "drafts": total.get(profile.drafts, 0.0),
        "draft_tokens": total.get(profile.draft_tokens, 0.0),
        "decode_steps": steps,
        "rounds": steps,
        "decode_s": decode_s,
        "prefix_cache_hits": total.get(profile.prefix_hits),
        "pooled_rate_tps": (steps + accepted) / decode_s,
        "accepted_per_round": accepted / steps,
        "ms_per_round": 1000.0 * decode_s / steps,
    }


def _check_only_ours(
    where: str, generation: float, first: float, streams: Sequence[StreamRecord], profile: ServerProfile
) -> None:
    """The counters hold this repeat's streams and nothing else: the server's request count is the client's,
    or (a server that counts no requests) its generated tokens are exactly the ones the streams received."""
    if profile.counts_requests:
        if first != len(streams):
            raise MetricsError(
                f"{where}: the server counted {first:g} requests, the client sent {len(streams)}; "
                "something else is using this server"
            )
        return
    received = [s.completion_tokens for s in streams]
    if None in received:
        raise MetricsError(f"{where}: a stream carried no usage, so the server's tokens cannot be matched to it")
    tokens = sum(n or 0 for n in received)
    if generation != tokens:
        raise MetricsError(
            f"{where}: the server generated {generation:g} tokens, the client's {len(streams)} streams received "
            f"{tokens}; something else is using this server"
        )


def client_rate(streams: Sequence[StreamRecord]) -> float | None:
    """The client's decode rate over the streams it can trust (a warm-up's, where no counters are read)."""
    kept, problem = trusted(streams)
    return None if problem is not None else _client_side(kept)["decode_tps"]


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
