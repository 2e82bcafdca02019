"""The chunk timeline of one stream, and what it says about delivery.

Every chunk's arrival is kept (seconds after the send) with its token count when the
server says it (``token_ids`` on the choice, e.g. vLLM with ``return_token_ids``);
otherwise the count is unknown and only the chunk is counted. The summary goes on
the stream record; the whole timeline goes to a sidecar file per start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np
from pydantic import ConfigDict

from fairwin.formats import CHUNKS, RecordFormat
from fairwin.records import Record

#: Chunks closer together than this arrived in one burst: a healthy server streams a
#: decode step at a time, and no decode step on any hardware we know is this short.
BURST_SPAN_S = 0.001


class ChunkTimeline(Record):
    """``fairwin.chunks/1``: one stream's text chunks as they arrived (``starts/sN/chunks.jsonl``)."""

    record_format: ClassVar[RecordFormat] = CHUNKS
    model_config = ConfigDict(extra="forbid")

    format: Literal["fairwin.chunks/1"] = "fairwin.chunks/1"
    start: str
    wave: str
    stream: int
    arrivals_ms: list[float]  # after the send
    tokens: list[int] | None  # per chunk, when the server lists token ids
    done_ms: float | None


@dataclass
class Timeline:
    """Arrivals of the chunks that carried text, seconds after the request was sent."""

    arrivals: list[float] = field(default_factory=list)
    tokens: list[int | None] = field(default_factory=list)
    done_s: float | None = None

    def add(self, at: float, tokens: int | None) -> None:
        self.arrivals.append(at)
        self.tokens.append(tokens)

    def gaps_ms(self) -> dict[str, float] | None:
        """Percentiles of the gaps between consecutive text chunks, in ms."""
        if len(self.arrivals) < 2:
            return None
        gaps = np.diff(np.asarray(self.arrivals)) * 1000.0
        p50, p90, p99 = np.percentile(gaps, [50, 90, 99])
        return {
            "p50": round(float(p50), 3),
            "p90": round(float(p90), 3),
            "p99": round(float(p99), 3),
            "max": round(float(gaps.max()), 3),
        }

    def largest_burst(self) -> int:
        """The most chunks that arrived within any BURST_SPAN_S (1 for evenly streamed chunks)."""
        times = self.arrivals
        best, left = 0, 0
        for right, now in enumerate(times):
            while now - times[left] > BURST_SPAN_S:
                left += 1
            best = max(best, right - left + 1)
        return best

    def done_gap_s(self) -> float | None:
        """From the last text chunk to ``[DONE]``: the usage chunk and the server's wrap-up."""
        if self.done_s is None or not self.arrivals:
            return None
        return self.done_s - self.arrivals[-1]

    def sidecar_row(self, start: str, wave: str, stream: int) -> ChunkTimeline:
        known = [t for t in self.tokens if t is not None]
        return ChunkTimeline(
            start=start,
            wave=wave,
            stream=stream,
            arrivals_ms=[round(t * 1000.0, 3) for t in self.arrivals],
            tokens=known if len(known) == len(self.tokens) else None,
            done_ms=None if self.done_s is None else round(self.done_s * 1000.0, 3),
        )
