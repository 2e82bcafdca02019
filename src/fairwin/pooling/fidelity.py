"""Can the client's timing of a stream be trusted? A stated, measurable rule.

The client's clock starts at the send and reads each chunk as its event loop gets to
it. When that loop cannot run (its thread waits for a CPU the server's processes
hold), chunks pile up in the socket and are read together: time to first token is
inflated and the decode interval collapses, with nothing wrong in the server. On a
2-core machine running vLLM for CPU this was measured directly: every such stream's
client thread had waited on the run queue for the whole stream (0.08 to 0.17 s of
0.08 to 0.17 s), while a packet capture showed the server had sent its chunks evenly.

A stream's client timing is **untrusted** when any of these holds:

1. **Against the server's own clock** (when the server reports per-request timing):
   the client's decode interval differs from the server's by more than
   ``SERVER_TOLERANCE`` (10 %).
2. **Against the server's counters** (any server fairwin pools): the client's decode
   interval is below ``COMPRESSION_FLOOR`` (half) of what the wave's server decode
   time implies for the stream's tokens: tokens cannot arrive faster than they were made.
3. **Against the kernel**: the client's event loop waited for a CPU for more than
   ``RUNQUEUE_CEILING`` (20 %) of the stream's time on the wire.

Client-side metrics (decode rate, TTFT) pool only trusted streams.
"""

from __future__ import annotations

from collections.abc import Sequence

from fairwin.client.stream import StreamRecord

SERVER_TOLERANCE = 0.10
COMPRESSION_FLOOR = 0.5
RUNQUEUE_CEILING = 0.20
#: A repeat's client metrics are observed only when at least this share of its streams is trusted.
TRUSTED_SHARE = 0.5


def judge_stream(record: StreamRecord, implied_decode_s: float | None) -> str | None:
    """Why the client's timing of this stream cannot be trusted, or None when it can."""
    client = record.decode_s
    if client is None:
        return "no decode interval (fewer than two text chunks)"
    problems: list[str] = []
    server = record.server_decode_s
    if server is not None and abs(client / server - 1.0) > SERVER_TOLERANCE:
        problems.append(
            f"client decode {client * 1000:.1f} ms vs the server's own {server * 1000:.1f} ms "
            f"({client / server:.2f}x; tolerance {SERVER_TOLERANCE:.0%})"
        )
    if implied_decode_s is not None and implied_decode_s > 0 and client < COMPRESSION_FLOOR * implied_decode_s:
        problems.append(
            f"client decode {client * 1000:.1f} ms is under half the {implied_decode_s * 1000:.1f} ms the server's "
            f"counters imply: the stream was read in a burst (largest burst {record.largest_burst_chunks} chunks)"
        )
    on_wire = (record.last_token_s or 0.0) + (record.done_gap_s or 0.0)  # send to [DONE]
    waited = record.client_runqueue_wait_s
    if waited is not None and on_wire > 0 and waited > RUNQUEUE_CEILING * on_wire:
        problems.append(
            f"the client's event loop waited {waited * 1000:.1f} ms for a CPU during the stream's "
            f"{on_wire * 1000:.1f} ms (CPU starvation: lower the server's priority with the role's `nice`, or "
            "give it and the client separate `cpus`)"
        )
    return "; ".join(problems) or None


def implied_decode_times(streams: Sequence[StreamRecord], server_decode_s: float | None) -> list[float | None]:
    """Each stream's share of the wave's server decode time, by its tokens after the first."""
    tokens = [max((s.completion_tokens or 0) - 1, 0) for s in streams]
    total = sum(tokens)
    if server_decode_s is None or server_decode_s <= 0 or total == 0:
        return [None] * len(streams)
    return [server_decode_s * n / total for n in tokens]


def judge_wave(streams: Sequence[StreamRecord], server_decode_s: float | None) -> None:
    """Mark every finished stream of a wave trusted or untrusted, with the reason."""
    for record, implied in zip(streams, implied_decode_times(streams, server_decode_s), strict=True):
        if not record.ok:
            continue
        problem = judge_stream(record, implied)
        record.client_timing_trusted = problem is None
        record.client_timing_problem = problem


def trusted(streams: Sequence[StreamRecord]) -> tuple[list[StreamRecord], str | None]:
    """The streams whose client timing pools, and why the repeat has no client metrics (None if it has).

    Streams judged before this rule existed (``client_timing_trusted`` is None) are trusted,
    so an old window pools, and decides, as it did.
    """
    kept = [s for s in streams if s.client_timing_trusted is not False]
    if streams and len(kept) >= max(1, TRUSTED_SHARE * len(streams)):
        return kept, None
    first = next((s for s in streams if s.client_timing_problem), None)
    reason = f"{len(streams) - len(kept)} of {len(streams)} streams' client timing untrusted"
    if first is not None:
        reason += f" ({first.wave} stream {first.stream}: {first.client_timing_problem})"
    return kept, reason
