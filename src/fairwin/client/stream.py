"""One streamed request, timed from the client's side.

Times are ``time.perf_counter()`` seconds relative to the send, so they are immune
to wall-clock steps; ``sent_unix`` anchors the stream in real time. The token count
is the server's own ``usage.completion_tokens`` (requested with
``stream_options.include_usage``): a chunk may carry several tokens under speculative
decoding, so counting chunks would be wrong.

Beside the client's own clock, a record keeps what can check it: the chunk timeline's
summary, the server's per-request timing when the server sends it on the usage chunk
(vLLM with ``--enable-per-request-metrics``: ``metrics.generation_time_ms`` is the
decode interval), and how long the client's event loop waited for a CPU while the
stream ran. :mod:`fairwin.pooling.fidelity` judges from them whether the client's
timing of the stream can be trusted.
"""

from __future__ import annotations

import json
import time
from typing import Any, ClassVar, Literal

import orjson
from pydantic import ConfigDict, JsonValue, PrivateAttr

from fairwin.client.runqueue import RunqueueClock
from fairwin.client.sse_transport import StreamTransport
from fairwin.client.timeline import Timeline
from fairwin.errors import StreamError, TransportError, WaveError
from fairwin.formats import STREAM, RecordFormat
from fairwin.records import Record
from fairwin.transport import status_error, transport_error


class StreamRecord(Record):
    """What one stream did; written to streams.jsonl whether it succeeded or not."""

    record_format: ClassVar[RecordFormat] = STREAM
    model_config = ConfigDict(extra="forbid")

    # /1 rows lack the delivery summary and the trust verdict, which default here.
    format: Literal["fairwin.stream/1", "fairwin.stream/2"] = "fairwin.stream/2"
    start: str
    role: str
    cell: str
    wave: str  # wave key, or "warmup"
    repeat: int
    family: str
    stream: int
    prompt_id: str
    prompt_tokens_expected: int
    seed: int
    cache_salt: str
    endpoint: Literal["completions", "chat"]
    max_tokens: int
    sent_unix: float = 0.0
    first_token_s: float | None = None
    last_token_s: float | None = None
    chunks: int = 0
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    usage: dict[str, JsonValue] | None = None
    ok: bool = False
    error: str | None = None
    # Delivery, from the chunk timeline (the whole timeline is in starts/sN/chunks.jsonl).
    text_chunks: int = 0
    chunk_gaps_ms: dict[str, float] | None = None
    largest_burst_chunks: int | None = None
    done_gap_s: float | None = None
    # The server's own timing of this request, as it sent it (vLLM: the usage chunk's `metrics`;
    # llama.cpp: the last chunk's `timings`).
    server_timing: dict[str, JsonValue] | None = None
    # Seconds the client's event loop waited for a CPU while this stream ran (Linux schedstat).
    client_runqueue_wait_s: float | None = None
    # Whether the client's timing of this stream can be trusted, and why not (fidelity.judge_stream).
    client_timing_trusted: bool | None = None
    client_timing_problem: str | None = None

    _timeline: Timeline = PrivateAttr(default_factory=Timeline)

    @property
    def timeline(self) -> Timeline:
        return self._timeline

    @property
    def ttft_s(self) -> float | None:
        return self.first_token_s

    @property
    def decode_s(self) -> float | None:
        if self.first_token_s is None or self.last_token_s is None:
            return None
        return self.last_token_s - self.first_token_s

    @property
    def server_decode_s(self) -> float | None:
        """The server's decode interval for this request (first to last token), when it reported one
        (vLLM's ``generation_time_ms``; llama.cpp's ``predicted_ms``, measured from the prompt's end)."""
        timing = self.server_timing or {}
        value = timing.get("generation_time_ms", timing.get("predicted_ms"))
        return float(value) / 1000.0 if isinstance(value, int | float) and value > 0 else None

    def summarize_timeline(self) -> None:
        timeline = self._timeline
        self.text_chunks = len(timeline.arrivals)
        self.chunk_gaps_ms = timeline.gaps_ms()
        self.largest_burst_chunks = timeline.largest_burst() if timeline.arrivals else None
        self.done_gap_s = timeline.done_gap_s()


def request_body(
    record: StreamRecord, model: str, prompt: str, temperature: float, top_p: float, extra: dict[str, JsonValue]
) -> dict[str, JsonValue]:
    body: dict[str, JsonValue] = {
        "model": model,
        "max_tokens": record.max_tokens,
        "temperature": temperature,
        "top_p": top_p,
        "seed": record.seed,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "cache_salt": record.cache_salt,
        **extra,
    }
    if record.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


class _Reading:
    """What a stream's chunks say, gathered in plain attributes while they arrive and put on the record once
    (:meth:`commit`, also when the stream fails): a pydantic field set costs a microsecond or two, and a stream
    is read at tens of thousands of chunks a second."""

    __slots__ = ("chat", "chunks", "finish", "first", "last", "timeline", "timing", "usage")

    def __init__(self, record: StreamRecord) -> None:
        self.chat = record.endpoint == "chat"
        self.timeline = record.timeline
        self.chunks = 0
        self.first: float | None = None
        self.last: float | None = None
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None
        self.timing: dict[str, Any] | None = None

    def absorb(self, chunk: dict[str, Any], elapsed: float) -> None:
        # Once per chunk: the choice's text is a chat chunk's delta content or a completion's text, and its
        # token count is its token_ids' length where the server lists them (None: unknown).
        if "error" in chunk:
            raise StreamError(f"server reported an error mid-stream: {json.dumps(chunk['error'])[:300]}")
        self.chunks += 1
        for choice in chunk.get("choices") or ():
            text = (choice.get("delta") or {}).get("content") if self.chat else choice.get("text")
            if text:
                if self.first is None:
                    self.first = elapsed
                self.last = elapsed
                ids = choice.get("token_ids")
                self.timeline.add(elapsed, len(ids) if isinstance(ids, list) else None)
            finish = choice.get("finish_reason")
            if finish:
                self.finish = str(finish)
        usage = chunk.get("usage")
        if usage:
            self.usage = usage
        for key in ("metrics", "timings"):  # vLLM's, llama.cpp's
            timing = chunk.get(key)
            if isinstance(timing, dict):
                self.timing = timing

    def commit(self, record: StreamRecord) -> None:
        record.chunks += self.chunks
        if self.first is not None and record.first_token_s is None:
            record.first_token_s = self.first
        if self.last is not None:
            record.last_token_s = self.last
        if self.finish is not None:
            record.finish_reason = self.finish
        if self.usage is not None:
            record.usage = self.usage
            record.completion_tokens = self.usage.get("completion_tokens")
            record.prompt_tokens = self.usage.get("prompt_tokens")
        if self.timing is not None:
            record.server_timing = self.timing


def sse_payload(line: str) -> str | None:
    """The payload of a server-sent ``data:`` line (``[DONE]`` included); None for any other line."""
    line = line.strip()
    return line[len("data:") :].strip() if line.startswith("data:") else None


class SseLines:
    """The ``data:`` payloads in a server-sent event stream, from its bytes as the network delivers them.

    Written here, not taken from a library: aiohttp reads a stream a line at a time, one await per line
    (three a chunk), which cost about half of the client's CPU per streamed token; this takes whatever bytes
    arrived in one read and splits them in C. A line split across two reads is kept until its end arrives.
    """

    __slots__ = ("_partial",)

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, data: bytes) -> list[bytes]:
        lines = (self._partial + data).split(b"\n") if self._partial else data.split(b"\n")
        self._partial = lines.pop()
        return [line[5:].strip() for line in lines if line.startswith(b"data:")]

    def end(self) -> list[bytes]:
        """The payload of a last line the stream closed without ending (as a line reader yields it at EOF)."""
        last, self._partial = self._partial, b""
        return [last[5:].strip()] if last.startswith(b"data:") else []


class _StreamSink:
    """A streamed completion's body, read as its bytes arrive (:class:`~fairwin.client.sse_transport.BodySink`)."""

    __slots__ = ("done", "lines", "reading", "record", "t0")

    def __init__(self, record: StreamRecord, t0: float) -> None:
        self.record, self.t0 = record, t0
        self.reading = _Reading(record)
        self.lines = SseLines()
        self.done = False

    def begin(self, content_type: str) -> None:
        if "text/event-stream" not in content_type:
            raise StreamError(
                f"non-streaming reply (Content-Type {content_type or 'missing'!r}); the server must "
                "support stream=true with server-sent events"
            )

    def feed(self, data: bytes, arrived: float) -> None:
        if not self.done:  # every chunk of one read arrived together
            self.done = _take(self.lines.feed(data), self.reading, self.record, arrived - self.t0)

    def end(self) -> None:
        if not self.done:  # a last line the stream closed without ending
            self.done = _take(self.lines.end(), self.reading, self.record, time.perf_counter() - self.t0)
        if not self.done:
            raise StreamError("stream ended without [DONE]: the connection closed early")


def _take(payloads: list[bytes], reading: _Reading, record: StreamRecord, arrived: float) -> bool:
    """Absorb the payloads that arrived together; True at ``[DONE]``."""
    for payload in payloads:
        if payload == b"[DONE]":
            record.timeline.done_s = arrived
            return True
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise StreamError(f"stream chunk is not JSON: {payload[:120]!r}") from None
        reading.absorb(chunk, arrived)
    return False


def check_complete(record: StreamRecord) -> None:
    if record.completion_tokens is None:
        raise StreamError(
            "stream carried no usage; the server must honour stream_options.include_usage so tokens "
            "can be counted exactly"
        )
    if record.completion_tokens != record.max_tokens:
        raise StreamError(
            f"stream produced {record.completion_tokens} tokens, not max_tokens={record.max_tokens} "
            f"(finish_reason={record.finish_reason}); the server must honour ignore_eos"
        )
    if record.first_token_s is None:
        raise StreamError("stream carried no text at all")


async def run_stream(
    transport: StreamTransport, url: str, record: StreamRecord, body: dict[str, JsonValue]
) -> StreamRecord:
    """Send one streaming request; fill ``record`` in place, raising on any failure."""
    what = f"{record.start} {record.wave} stream {record.stream}"
    payload = orjson.dumps(body)
    record.sent_unix = time.time()
    runqueue = RunqueueClock()
    t0 = time.perf_counter()
    sink = _StreamSink(record, t0)
    try:
        try:
            answer = await transport.post(url, payload, sink)
            if answer.status >= 300:
                raise status_error(what, url, answer.status, answer.error_body)
            sink.end()
        finally:
            sink.reading.commit(record)
        check_complete(record)
    except (TimeoutError, TransportError) as exc:
        raise transport_error(what, url, exc) from None
    except StreamError as exc:
        raise StreamError(f"{what}: {exc}") from None
    finally:
        record.client_runqueue_wait_s = runqueue.elapsed()
        record.summarize_timeline()
    record.ok = True
    return record


async def run_stream_recorded(
    transport: StreamTransport, url: str, record: StreamRecord, body: dict[str, JsonValue]
) -> StreamRecord:
    """Like :func:`run_stream`, but a failure is kept on the record as evidence and re-raised."""
    try:
        return await run_stream(transport, url, record, body)
    except WaveError as exc:
        record.ok = False
        record.error = str(exc)
        raise
