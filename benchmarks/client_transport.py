"""What a streamed token costs the client: fairwin's wave beside two bare transports, its floor.

Against `fairwin sim` (wall clock, 10 ms rounds: at 4 and 32 streams each chunk is its own network read, as
against a real engine), the client process's CPU per streamed token, for:

- ``fairwin``: fairwin's client as a window runs it (``run_wave``: its stream transport, the stream records,
  the counter scrapes; no lag sampling);
- ``protocol``: a bare ``asyncio.Protocol`` that writes the request and reads the SSE lines in
  ``data_received``, with no task woken per chunk;
- ``protocol+uvloop``: the same on uvloop's event loop (libuv: the loop and the transport are C).

The protocol here is a measuring device, not a client: it sends one HTTP/1.1 request per connection, finds the
``data:`` lines in the raw bytes (the sim writes one event per HTTP chunk, so no line is split by chunk framing)
and keeps only the arrival times.

    python benchmarks/client_transport.py [--streams 4 32] [--tokens 512] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, cast

import orjson
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from client_scale import start_sim, waves  # the window's own wave, through the window's session

from fairwin.launch.spec import free_port


class SseProtocol(asyncio.Protocol):
    """One streamed completion on its own connection; ``done`` gets the text chunks' arrival times."""

    def __init__(self, request: bytes, done: asyncio.Future[list[float]]) -> None:
        self.request, self.done = request, done
        self.t0 = time.perf_counter()
        self.head = b""
        self.body = False
        self.partial = b""
        self.arrivals: list[float] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not an asyncio.Transport subclass
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        arrived = time.perf_counter() - self.t0
        if not self.body:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            self.body, data = True, self.head[end + 4 :]
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                self.done.set_result(self.arrivals)
                assert self.transport is not None
                self.transport.close()
                return
            for choice in orjson.loads(payload).get("choices") or ():
                if choice.get("text"):
                    self.arrivals.append(arrived)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"the stream closed before [DONE]: {exc}"))


async def protocol_wave(port: int, streams: int, tokens: int) -> float:
    """CPU seconds per streamed token over one wave of ``streams`` concurrent streams."""
    loop = asyncio.get_running_loop()

    async def one(index: int) -> list[float]:
        body = json.dumps(
            {
                "model": "scale",
                "prompt": f"prompt {index}",
                "max_tokens": tokens,
                "stream": True,
                "ignore_eos": True,
                "temperature": 0,
                "stream_options": {"include_usage": True},
            }
        ).encode()
        request = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n" % len(body)) + body  # fmt: skip
        done: asyncio.Future[list[float]] = loop.create_future()
        await loop.create_connection(lambda: SseProtocol(request, done), "127.0.0.1", port)
        return await done

    cpu0 = time.process_time()
    arrivals = await asyncio.gather(*(one(i) for i in range(streams)))
    cpu = time.process_time() - cpu0
    if any(len(a) != tokens for a in arrivals):
        raise SystemExit("a stream did not bring every token")
    return cpu / (streams * tokens)


def measured(run: Callable[[Coroutine[Any, Any, float]], float], port: int, streams: int, tokens: int) -> float:
    return 1e6 * run(protocol_wave(port, streams, tokens))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[4, 32])
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    port = free_port()
    sim = start_sim(port, "10", "wall")
    url = f"http://127.0.0.1:{port}"
    try:
        for streams in args.streams:
            found: dict[str, list[float]] = {"fairwin": [], "protocol": [], "protocol+uvloop": []}
            for _ in range(args.runs):  # interleaved, so that the machine's drift falls on all three alike
                wave = asyncio.run(waves(url, streams, args.tokens, 1, watch_lag=False))[0]
                found["fairwin"].append(wave["cpu_us_per_token"])
                found["protocol"].append(measured(asyncio.run, port, streams, args.tokens))
                found["protocol+uvloop"].append(measured(uvloop.run, port, streams, args.tokens))
            cells = ", ".join(f"{name} {statistics.median(values):.1f} us" for name, values in found.items())
            print(f"{streams:3d} streams x {args.tokens} tokens, median of {args.runs}: {cells}")
    finally:
        sim.terminate()
        sim.wait()


if __name__ == "__main__":
    main()
