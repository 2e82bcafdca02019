"""What the streaming client costs per token: aiohttp (what fairwin uses) against httpx.

The client shares the machine with the server under test, so every microsecond it
spends per streamed chunk is taken from the measurement. This starts `fairwin sim`
with zero-cost rounds (so the client, not the server, is the bottleneck), streams
the same requests through both libraries, and reports the client process's CPU time
per token and its wall-clock throughput.

    python benchmarks/client_per_token.py [--streams 20] [--tokens 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable

import aiohttp
import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def body(tokens: int, index: int) -> dict[str, object]:
    return {
        "model": "bench", "prompt": "a b c", "max_tokens": tokens, "ignore_eos": True, "stream": True,
        "stream_options": {"include_usage": True}, "seed": index,
    }  # fmt: skip


async def with_aiohttp(url: str, streams: int, tokens: int) -> int:
    got = 0
    async with aiohttp.ClientSession() as session:
        for i in range(streams):
            async with session.post(url, json=body(tokens, i)) as response:
                async for raw in response.content:
                    line = raw.decode().strip()
                    if line.startswith("data:") and line != "data: [DONE]":
                        chunk = json.loads(line[5:])
                        got += len(chunk["choices"])
    return got


async def with_httpx(url: str, streams: int, tokens: int) -> int:
    got = 0
    async with httpx.AsyncClient(timeout=None) as client:
        for i in range(streams):
            async with client.stream("POST", url, json=body(tokens, i)) as response:
                async for line in response.aiter_lines():
                    line = line.strip()
                    if line.startswith("data:") and line != "data: [DONE]":
                        chunk = json.loads(line[5:])
                        got += len(chunk["choices"])
    return got


def measure(
    name: str, run: Callable[[str, int, int], Awaitable[int]], url: str, streams: int, tokens: int
) -> dict[str, float]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    chunks = asyncio.run(run(url, streams, tokens))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    total = streams * tokens
    return {"client": name, "chunks": chunks, "tokens": total, "cpu_us_per_token": 1e6 * cpu / total,
            "wall_tokens_per_s": total / wall}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per client")
    args = parser.parse_args()
    port = free_port()
    sim = subprocess.Popen(
        [sys.executable, "-m", "fairwin", "sim", "--port", str(port), "--model", "bench", "--ms-per-round", "0",
         "--prefill-ms-per-token", "0", "--jitter", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                httpx.get(url + "/health")
                break
            except httpx.TransportError:
                time.sleep(0.1)
        results = []
        for _ in range(args.rounds):  # alternate, so drift in the machine hits both alike
            results.append(measure("aiohttp", with_aiohttp, url + "/v1/completions", args.streams, args.tokens))
            results.append(measure("httpx", with_httpx, url + "/v1/completions", args.streams, args.tokens))
        for name in ("aiohttp", "httpx"):
            mine = [r for r in results if r["client"] == name]
            cpu = sorted(r["cpu_us_per_token"] for r in mine)
            wall = sorted(r["wall_tokens_per_s"] for r in mine)
            median_cpu, median_wall = cpu[len(cpu) // 2], wall[len(wall) // 2]
            print(
                f"{name:8s} client CPU per token: median {median_cpu:.1f} us (min {cpu[0]:.1f}, max {cpu[-1]:.1f}); "
                f"wall {median_wall:.0f} tok/s"
            )
    finally:
        sim.terminate()
        sim.wait()


if __name__ == "__main__":
    main()
