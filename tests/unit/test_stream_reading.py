"""Reading a server-sent event stream from the bytes as they arrive (client/stream.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest
from aiohttp import web

from fairwin.client.sse_transport import StreamTransport
from fairwin.client.stream import SseLines, StreamRecord, run_stream
from fairwin.errors import StreamError
from tests.unit.test_pool import stream


def test_payloads_split_across_reads_are_joined_and_other_lines_skipped() -> None:
    lines = SseLines()
    assert lines.feed(b'data: {"a": 1}\n\ndata: {"b"') == [b'{"a": 1}']
    assert lines.feed(b": 2}\r\n\r\n: a comment\nevent: x\n") == [b'{"b": 2}']  # CRLF too
    assert lines.feed(b"data: [DONE]") == []  # not ended yet
    assert lines.end() == [b"[DONE]"]  # ended by the close, as a line reader yields it
    assert lines.end() == []


def chunk(text: str, **more: object) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "text": text, "finish_reason": None}], **more}).encode()


def record() -> StreamRecord:
    """A stream not sent yet."""
    fresh = {"first_token_s": None, "last_token_s": None, "completion_tokens": None, "ok": False}
    return stream(0.0, 0.0, 3).model_copy(update=fresh)


async def served(pieces: Sequence[bytes], mine: StreamRecord | None = None) -> StreamRecord:
    """A stream whose body is written in exactly these pieces, a few ms apart, read by the client."""

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for piece in pieces:
            await response.write(piece)
            await asyncio.sleep(0.005)
        return response

    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    mine = mine or record()
    try:
        async with StreamTransport() as transport:
            await run_stream(transport, f"http://127.0.0.1:{port}/v1/completions", mine, {})
    finally:
        await runner.cleanup()
    return mine


USAGE = b'data: {"choices": [{"index": 0, "text": "", "finish_reason": "length"}], "usage": ' + (
    b'{"completion_tokens": 3, "prompt_tokens": 3}, "timings": {"predicted_ms": 12.5}}\n\n'
)


def test_a_stream_in_odd_pieces_is_read_whole_with_each_chunks_arrival() -> None:
    # The second chunk's line is cut in the middle; the usage chunk and [DONE] come in one write.
    second = chunk(" b") + b"\n\n"
    pieces = [chunk("a") + b"\n\n", second[:9], second[9:], chunk(" c") + b"\n\n" + USAGE + b"data: [DONE]\n\n"]
    done = asyncio.run(served(pieces))
    assert done.ok and done.completion_tokens == 3 and done.finish_reason == "length"
    assert done.chunks == 4 and done.text_chunks == 3
    assert done.server_decode_s == 0.0125  # llama.cpp's own timing of the request
    arrivals = done.timeline.arrivals
    assert arrivals[0] < arrivals[1] < arrivals[2]  # three reads, three times
    assert done.first_token_s == arrivals[0] and done.last_token_s == arrivals[2]
    assert done.timeline.done_s == arrivals[2]  # in the same read as the last text


def test_token_ids_and_chat_deltas_are_read_from_each_chunk() -> None:
    ids = b"data: " + json.dumps({"choices": [{"index": 0, "text": "a", "token_ids": [5, 6]}]}).encode()
    done = asyncio.run(served([ids + b"\n\n", chunk(" b") + b"\n\n" + USAGE + b"data: [DONE]\n\n"]))
    assert done.timeline.tokens == [2, None]  # the ids where the server lists them, else unknown

    def delta(content: str) -> bytes:
        return b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": content}}]}).encode() + b"\n\n"

    chat = record().model_copy(update={"endpoint": "chat"})
    role_only = b'data: {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}\n\n'  # no text: not a token
    done = asyncio.run(served([role_only, delta("a"), delta(""), delta(" b") + USAGE + b"data: [DONE]\n\n"], chat))
    assert done.ok and done.chunks == 5 and done.text_chunks == 2
    assert done.first_token_s == done.timeline.arrivals[0] and done.last_token_s == done.timeline.arrivals[1]


def test_a_stream_cut_before_done_or_with_an_error_fails_keeping_what_it_read() -> None:
    cut = record()
    with pytest.raises(StreamError, match="ended without \\[DONE\\]"):
        asyncio.run(served([chunk("a") + b"\n\n", chunk(" b") + b"\n\n"], cut))
    assert cut.chunks == 2 and cut.first_token_s is not None and cut.text_chunks == 2  # the evidence stays
    with pytest.raises(StreamError, match="server reported an error mid-stream"):
        asyncio.run(served([chunk("a") + b"\n\n", b'data: {"error": {"message": "boom", "code": 400}}\n\n']))
    with pytest.raises(StreamError, match="stream chunk is not JSON"):
        asyncio.run(served([b"data: {not json\n\n"]))
