"""The transport a wave's streams travel on: HTTP/1.1 over pooled keep-alive connections, read in callbacks.

Written here rather than taken whole from a library, and why: aiohttp (which fairwin uses for every other
request) reads a response through a stream reader, a future and a task step for each network read, and that
machinery, not the parsing, was most of the client's CPU per streamed token (``benchmarks/client_transport.py``:
about 27 us a token through aiohttp at 32 streams, 11 through a protocol that reads in ``data_received``). A
fast engine at high concurrency sends tens of thousands of one-token chunks a second, one network read each.
So a stream's bytes are parsed where they arrive: ``httptools`` (llhttp, the parser uvicorn and aiohttp build
on) frames the response, and the body goes straight to the stream's :class:`BodySink`, with no task woken
until the response is complete. What is hand-written is only the glue: a connection pool, a request writer
and the handing over of errors.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, cast
from urllib.parse import urlsplit

import httptools

from fairwin.errors import TransportError

USER_AGENT = "fairwin"


class BodySink(Protocol):
    """What reads a 2xx answer's body: told its content type once, then fed each read's bytes with the read's
    arrival time (``time.perf_counter()``). An exception it raises fails the request."""

    def begin(self, content_type: str) -> None: ...

    def feed(self, data: bytes, arrived: float) -> None: ...


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, url: str) -> tuple[Origin, str]:
        """The origin a URL is sent to, and its path with the query."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TransportError(f"{url}: not an http:// or https:// URL")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        path = parts.path or "/"
        return cls(parts.scheme, parts.hostname, port), path + (f"?{parts.query}" if parts.query else "")

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


class _Exchange:
    """One request's response as it is parsed: the parser's callbacks land here."""

    __slots__ = (
        "arrived", "content_type", "done", "error_body", "framed", "headers_done", "received", "sink", "status"
    )  # fmt: skip

    def __init__(self, sink: BodySink, done: asyncio.Future[None]) -> None:
        self.sink, self.done = sink, done
        self.status = 0
        self.content_type = ""
        self.arrived = 0.0
        self.received = False  # any byte of the response: a request that got none may be retried
        self.headers_done = False
        self.framed = False  # a length or chunked encoding says where the body ends; else the close does
        self.error_body: bytearray | None = None  # a non-2xx answer's body, kept for the error


class _Connection(asyncio.Protocol):
    """One keep-alive connection; carries one exchange at a time. ``on_idle`` takes it back into the pool when
    an answer is complete and the server keeps the connection open; ``on_closed`` forgets it."""

    def __init__(self, on_idle: Callable[[_Connection], None], on_closed: Callable[[_Connection], None]) -> None:
        self._on_idle, self._on_closed = on_idle, on_closed
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.exchange: _Exchange | None = None
        self._parser = httptools.HttpResponseParser(self)

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transport is not a subclass

    def data_received(self, data: bytes) -> None:
        exchange = self.exchange
        if exchange is None:  # bytes nobody asked for: the connection cannot be trusted again
            self.close()
            return
        exchange.arrived = time.perf_counter()
        exchange.received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(TransportError(f"the server's HTTP response could not be parsed: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._on_closed(self)
        exchange, self.exchange = self.exchange, None
        if exchange is None or exchange.done.done():
            return
        if exchange.headers_done and not exchange.framed and exc is None:
            # A body the server ends by closing (no length, not chunked) ends here; whether it was whole is the
            # sink's to judge (a stream must have brought its [DONE]).
            exchange.done.set_result(None)
            return
        reason = f": {exc}" if exc else ""
        error = _Dropped(f"the server closed the connection before its answer was complete{reason}")
        error.before_response = not exchange.received
        exchange.done.set_exception(error)

    # httptools callbacks. The sink's own refusal (a StreamError) fails the request here: raised through the
    # parser it would come back as a parse error. Once the exchange failed, the rest of the read is ignored.
    def on_header(self, name: bytes, value: bytes) -> None:
        exchange = self.exchange
        if exchange is None:
            return
        name = name.lower()
        if name == b"content-type":
            exchange.content_type = value.decode("latin-1")
        elif name == b"content-length" or (name == b"transfer-encoding" and b"chunked" in value.lower()):
            exchange.framed = True

    def on_headers_complete(self) -> None:
        exchange = self.exchange
        if exchange is None:
            return
        exchange.status = self._parser.get_status_code()
        exchange.headers_done = True
        if exchange.status >= 300:
            exchange.error_body = bytearray()
            return
        try:
            exchange.sink.begin(exchange.content_type)
        except Exception as exc:
            self._fail(exc)

    def on_body(self, body: bytes) -> None:
        exchange = self.exchange
        if exchange is None:
            return
        if exchange.error_body is not None:
            exchange.error_body += body
            return
        try:
            exchange.sink.feed(body, exchange.arrived)
        except Exception as exc:
            self._fail(exc)

    def on_message_complete(self) -> None:
        exchange, self.exchange = self.exchange, None
        if exchange is None:
            return
        if not exchange.done.done():
            exchange.done.set_result(None)
        if self._parser.should_keep_alive() and not self.closed:
            self._on_idle(self)
        else:
            self.close()

    # fairwin's side
    def send(self, request: bytes, exchange: _Exchange) -> None:
        assert self.transport is not None and self.exchange is None
        self.exchange = exchange
        self.transport.write(request)

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()
        self.closed = True

    def _fail(self, error: BaseException) -> None:
        exchange, self.exchange = self.exchange, None
        if exchange is not None and not exchange.done.done():
            exchange.done.set_exception(error)
        self.close()


class _Dropped(TransportError):
    before_response = False


@dataclass
class Answer:
    """How a streamed request ended: its status, and the body of a non-2xx answer."""

    status: int
    error_body: str = ""


@dataclass
class StreamTransport:
    """POSTs whose bodies are read as they arrive, over an unbounded pool of keep-alive connections (a wave's
    own semaphore bounds its concurrency: a bounded pool would queue streams inside the client and time the
    wait as TTFT). ``headers`` go on every request (a server's key, from :func:`fairwin.transport.api_headers`).
    """

    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float | None = None
    ssl_context: ssl.SSLContext | None = None
    _idle: dict[Origin, list[_Connection]] = field(default_factory=dict, init=False, repr=False)
    _open: set[_Connection] = field(default_factory=set, init=False, repr=False)

    async def post(self, url: str, body: bytes, sink: BodySink) -> Answer:
        """Send ``body`` as JSON to ``url`` and read the answer into ``sink``. A pooled connection that the server
        closes before any byte of the answer is replaced once: a server closes an idle keep-alive connection when
        it likes, and a request that crossed that close was not answered. (Were it served after all, its tokens
        would show in the counters beyond the wave's streams, which pooling refuses.)"""
        origin, path = Origin.of(url)
        request = self._request(origin, path, body)
        async with asyncio.timeout(self.timeout_s):
            for attempt in range(2):
                connection, pooled = await self._connection(origin, fresh=attempt > 0)
                exchange = _Exchange(sink, asyncio.get_running_loop().create_future())
                connection.send(request, exchange)
                try:
                    await exchange.done
                except _Dropped as dropped:
                    if pooled and dropped.before_response:
                        continue
                    raise
                except BaseException:
                    connection.close()  # cancelled or timed out mid-answer: nothing else may read its bytes
                    raise
                break
        return Answer(exchange.status, bytes(exchange.error_body or b"").decode("utf-8", "replace"))

    async def close(self) -> None:
        for connection in list(self._open):
            connection.close()
        self._open.clear()
        self._idle.clear()

    async def __aenter__(self) -> StreamTransport:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _request(self, origin: Origin, path: str, body: bytes) -> bytes:
        lines = [
            f"POST {path} HTTP/1.1",
            f"Host: {origin.host_header}",
            "Content-Type: application/json",
            "Accept: text/event-stream",
            f"Content-Length: {len(body)}",
            f"User-Agent: {USER_AGENT}",
            *(f"{name}: {value}" for name, value in self.headers.items()),
        ]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    async def _connection(self, origin: Origin, fresh: bool) -> tuple[_Connection, bool]:
        """A connection to ``origin``, and whether it came from the pool (only a ``fresh`` one never does)."""
        idle = self._idle.get(origin, [])
        while idle and not fresh:
            connection = idle.pop()
            if not connection.closed:
                return connection, True
        loop = asyncio.get_running_loop()
        secure = self._tls() if origin.scheme == "https" else None
        try:
            _, protocol = await loop.create_connection(
                lambda: _Connection(self._release(origin), self._open.discard),
                origin.host,
                origin.port,
                ssl=secure,
                server_hostname=origin.host if secure else None,
            )
        except OSError as exc:
            raise TransportError(f"cannot connect to {origin.host}:{origin.port}: {exc.strerror or exc}") from None
        self._open.add(protocol)
        return protocol, False

    def _tls(self) -> ssl.SSLContext:
        """The plan's context, or the system's trust store, loaded once (loading it costs milliseconds)."""
        if self.ssl_context is None:
            self.ssl_context = ssl.create_default_context()
        return self.ssl_context

    def _release(self, origin: Origin) -> Callable[[_Connection], None]:
        def idle(connection: _Connection) -> None:
            self._idle.setdefault(origin, []).append(connection)

        return idle
