"""How many concurrent streams fairwin's client holds on 2 cores, and what its event loop suffers.

One wave of N concurrent streams against `fairwin sim` (vLLM's metric names and its
per-request timing), sent by the code a window runs (``fairwin.client.wave.run_wave``
through the window's session), with the event loop's lag sampled every 10 ms. Reported:
the loop's lag (median, p99, max), TTFT spread, how many streams the fidelity rule
trusted, the client's decode time against the server's own for the same streams, and
the client's CPU per streamed token.

    python benchmarks/client_scale.py [--streams 2000] [--tokens 64] [--ms-per-round 250]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import time
import urllib.request
from typing import Any

import aiohttp

from fairwin.client.prepare import PreparedPrompt, prompt_key
from fairwin.client.sse_transport import StreamTransport
from fairwin.client.wave import Target, run_wave
from fairwin.launch.spec import free_port
from fairwin.plan.loading import Prompt
from fairwin.plan.models import Cell
from fairwin.plan.schedule import WaveSpec
from fairwin.pooling.fidelity import judge_wave
from fairwin.profiles import VLLM
from fairwin.transport import client_session

LAG_TICK_S = 0.010


async def lag_monitor(samples: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(LAG_TICK_S)
        samples.append(time.perf_counter() - t0 - LAG_TICK_S)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def waves(url: str, streams: int, tokens: int, count: int, watch_lag: bool = True) -> list[dict[str, Any]]:
    """``count`` waves through one session, as a start runs them: the first opens the connections. Without
    ``watch_lag`` no lag is sampled (its own wake-ups cost CPU: a few us a token at 4 streams)."""
    async with client_session(aiohttp.ClientTimeout(total=600)) as session, StreamTransport(timeout_s=600) as transport:
        return [await one_wave(session, transport, url, streams, tokens, watch_lag) for _ in range(count)]


async def one_wave(
    session: aiohttp.ClientSession, transport: StreamTransport, url: str, streams: int, tokens: int, watch_lag: bool
) -> dict[str, Any]:
    cell = Cell(families=["f"], prompt_tokens=8, concurrency=streams, streams_per_wave=streams, temperature=0,
                max_tokens=tokens)  # fmt: skip
    prompts = tuple(Prompt(id=f"p{i}", text=f"prompt number {i} for the scale test") for i in range(streams))
    prepared = {prompt_key("f", p.id): PreparedPrompt(cell="c", family="f", id=p.id, target_tokens=8, tokens=7,
                                                      text=p.text) for p in prompts}  # fmt: skip
    spec = WaveSpec(cell="c", index=0, repeat=1, family="f", seed=1, prompts=prompts)
    target = Target(start="s1", kind="control", role="A", base_url=url, model="scale")
    lag: list[float] = []
    stop = asyncio.Event()
    monitor = asyncio.create_task(lag_monitor(lag, stop)) if watch_lag else None
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = await run_wave(session, transport, target, "scale", cell, spec, prepared, settle_timeout_s=60)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    stop.set()
    if monitor is not None:
        await monitor
    if result.error is not None:
        raise SystemExit(f"the wave failed: {result.error}")
    judge_wave(result.streams, result.deltas.get(VLLM.decode_sum))
    ttfts = [s.ttft_s or 0.0 for s in result.streams]
    trusted = [s for s in result.streams if s.client_timing_trusted]
    client = sum(s.decode_s or 0.0 for s in trusted)
    server = sum(s.server_decode_s or 0.0 for s in trusted)
    return {
        "streams": streams, "wall_s": wall, "cpu_us_per_token": 1e6 * cpu / (streams * tokens),
        "lag_ms": [1000 * statistics.median(lag), 1000 * percentile(lag, 0.99), 1000 * max(lag)] if lag else None,
        "ttft_ms": [1000 * min(ttfts), 1000 * statistics.median(ttfts), 1000 * max(ttfts)],
        "trusted": len(trusted), "client_over_server": client / server if server else None,
        "problems": sorted({(s.client_timing_problem or "")[:90] for s in result.streams} - {""})[:3],
    }  # fmt: skip


def start_sim(port: int, ms_per_round: str, clock: str) -> subprocess.Popen[bytes]:
    """`fairwin sim` serving model "scale" with zero-cost prefill and no jitter, once it answers /health."""
    sim = subprocess.Popen(
        [sys.executable, "-m", "fairwin", "sim", "--port", str(port), "--model", "scale", "--per-request-metrics",
         "--ms-per-round", ms_per_round, "--prefill-ms-per-token", "0", "--jitter", "0", "--clock", clock],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).close()
            return sim
        except OSError:
            time.sleep(0.1)
    sim.terminate()
    raise SystemExit("fairwin sim did not answer /health within 20 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--ms-per-round", type=float, default=250.0, help="the sim's decode round (per stream)")
    parser.add_argument("--clock", choices=["model", "wall"], default="model", help="what the sim's timing reports")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * args.streams)), hard))
    port = free_port()
    sim = start_sim(port, str(args.ms_per_round), args.clock)
    try:
        url = f"http://127.0.0.1:{port}"
        for streams in sorted({min(100, args.streams), args.streams}):
            for number, r in enumerate(asyncio.run(waves(url, streams, args.tokens, 2)), start=1):
                report(r, "new connections" if number == 1 else "pooled connections")
    finally:
        sim.terminate()
        sim.wait()


def report(r: dict[str, Any], connections: str) -> None:
    ratio = "n/a" if r["client_over_server"] is None else f"{r['client_over_server']:.4f}"
    lag, ttft = r["lag_ms"], r["ttft_ms"]
    print(
        f"{r['streams']:5d} streams, {connections}: {r['wall_s']:.1f} s; loop lag median/p99/max "
        f"{lag[0]:.1f}/{lag[1]:.1f}/{lag[2]:.1f} ms; TTFT min/median/max {ttft[0]:.0f}/{ttft[1]:.0f}/{ttft[2]:.0f} ms; "
        f"trusted {r['trusted']}; client/server decode {ratio}; client CPU {r['cpu_us_per_token']:.1f} us/token"
    )
    for problem in r["problems"]:
        print(f"      e.g. {problem}")


if __name__ == "__main__":
    main()
