"""The streams' transport (client/sse_transport.py) against raw HTTP servers: pooling, errors, TLS."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from fairwin.client.sse_transport import StreamTransport
from fairwin.client.stream import run_stream
from fairwin.errors import HTTPStatusError, StreamError, TransportError
from tests.components import missing
from tests.unit.test_stream_reading import USAGE, chunk, record

pytestmark = pytest.mark.timeout(30)

SSE = chunk("a") + b"\n\n" + chunk(" b") + b"\n\n" + chunk(" c") + b"\n\n" + USAGE + b"data: [DONE]\n\n"
Reply = Callable[[int, int], Awaitable[bytes | None]]  # (connection number, request on it) -> bytes; None: close


def chunked(body: bytes, content_type: bytes = b"text/event-stream") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"
    )  # fmt: skip


class RawServer:
    """An HTTP server written byte for byte: each request's head (and its body, by Content-Length) is read and
    ``reply`` says what goes back on that connection."""

    def __init__(self, reply: Reply, close_after_reply: bool = False) -> None:
        self.reply, self.close_after_reply = reply, close_after_reply
        self.connections = 0
        self.heads: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            for request in range(1, 1000):
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                self.heads.append(head)
                answer = await self.reply(number, request)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if self.close_after_reply or b"\r\nConnection: close\r\n" in answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


async def exchange(reply: Reply, count: int = 1, close_after_reply: bool = False, **options: object) -> RawServer:
    """``count`` streams one after another through one transport, against a server answering with ``reply``."""
    raw = RawServer(reply, close_after_reply)
    server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with StreamTransport(**options) as transport:  # type: ignore[arg-type]
            for _ in range(count):
                done = await run_stream(transport, f"http://127.0.0.1:{port}/v1/completions", record(), {})
                assert done.ok and done.completion_tokens == 3
    finally:
        server.close()
    return raw


async def always(number: int, request: int) -> bytes:
    return chunked(SSE)


def test_streams_share_one_keep_alive_connection_and_send_the_headers() -> None:
    raw = asyncio.run(exchange(always, count=3, headers={"Authorization": "Bearer k"}))
    assert raw.connections == 1
    assert all(b"\r\nAuthorization: Bearer k\r\n" in head for head in raw.heads)
    assert raw.heads[0].startswith(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:")


def test_an_idle_connection_the_server_dropped_is_replaced_once_without_losing_the_stream() -> None:
    async def forget_the_second(number: int, request: int) -> bytes | None:
        return chunked(SSE) if request == 1 else None  # the second on a connection: closed without a byte

    raw = asyncio.run(exchange(forget_the_second, count=2))
    assert raw.connections == 2 and len(raw.heads) == 3  # the second stream was sent again, on a new connection


def test_a_body_ended_by_closing_the_connection_is_read_whole() -> None:
    async def then_close(number: int, request: int) -> bytes:
        return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + SSE

    raw = asyncio.run(exchange(then_close, count=2))
    assert raw.connections == 2  # not kept alive


def test_a_framed_body_cut_by_the_close_is_a_transport_error() -> None:
    async def cut(number: int, request: int) -> bytes:
        whole = chunked(SSE)
        return whole[: len(whole) // 2]

    with pytest.raises(TransportError, match="closed the connection before its answer was complete"):
        asyncio.run(exchange(cut, close_after_reply=True))


def test_failures_are_named() -> None:
    async def refused(number: int, request: int) -> bytes:
        body = b'{"error": "no such model"}'
        return b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n" % len(body) + body

    with pytest.raises(HTTPStatusError, match=r"HTTP 404 from .*no such model") as caught:
        asyncio.run(exchange(refused))
    assert caught.value.status == 404

    async def json_reply(number: int, request: int) -> bytes:
        return chunked(b"{}", b"application/json")

    with pytest.raises(StreamError, match="non-streaming reply \\(Content-Type 'application/json'\\)"):
        asyncio.run(exchange(json_reply))

    async def silent(number: int, request: int) -> bytes:
        await asyncio.sleep(5)
        return chunked(SSE)

    with pytest.raises(TransportError, match=r"no answer from .*TimeoutError"):
        asyncio.run(exchange(silent, timeout_s=0.2))

    async def garbage(number: int, request: int) -> bytes:
        return b"SPDY/9 nonsense\r\n\r\n"

    with pytest.raises(TransportError, match="could not be parsed"):
        asyncio.run(exchange(garbage))


def test_a_port_nobody_listens_on_is_a_transport_error() -> None:
    async def nowhere() -> None:
        async with StreamTransport() as transport:
            await run_stream(transport, "http://127.0.0.1:9/v1/completions", record(), {})

    with pytest.raises(TransportError, match=r"cannot connect to 127\.0\.0\.1:9"):
        asyncio.run(nowhere())


def test_https_streams_over_tls(tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        missing("openssl", "its command makes the throwaway certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=str(cert))

    async def over_tls() -> int:
        raw = RawServer(always)
        server = await asyncio.start_server(raw.handle, "127.0.0.1", 0, ssl=serving)
        port = server.sockets[0].getsockname()[1]
        try:
            async with StreamTransport(ssl_context=trusting) as transport:
                for _ in range(2):
                    done = await run_stream(transport, f"https://localhost:{port}/v1/completions", record(), {})
                    assert done.ok and done.text_chunks == 3
        finally:
            server.close()
        return raw.connections

    assert asyncio.run(over_tls()) == 1
