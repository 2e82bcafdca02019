"""Client timing that cannot be trusted is flagged, pooled out, and named in the decision; scheduling is applied."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fairwin.files import read_jsonl
from fairwin.pooling.fidelity import RUNQUEUE_CEILING
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import fairwin, only_window, processes_with


def aa_window(
    make_plan: PlanFactory,
    *flags: str,
    model: str,
    ms_per_round: int = 3,
    nice: int | None = None,
    tokens: int = 48,
    warmup_waves: int | None = None,
) -> Path:
    """A two-repeat A/A window on `fairwin sim` with these flags, in one cell of two streams a wave from each of two
    families, ``tokens`` forced each, after at most ``warmup_waves`` uncounted waves (None: the plan's default); its
    directory."""
    cell = {"families": ["prose", "code"], "prompt_tokens": 64, "max_tokens": tokens, "streams_per_wave": 2}
    plan = make_plan(
        roles={
            "A": sim_role("--ms-per-round", str(ms_per_round), *flags, model=model, **({"nice": nice} if nice else {}))
        },
        modes={"aa": {"control": "A", "candidate": "A"}},
        window={"repeats": 2, **({} if warmup_waves is None else {"warmup_waves_max": warmup_waves})},
        cells={"short-b1": cell},
    )
    done = fairwin("run", str(plan), "--mode", "aa")
    assert done.returncode == 0, done.stderr
    return only_window(plan)


def test_a_stream_read_in_one_burst_is_flagged_and_never_decides(make_plan: PlanFactory) -> None:
    # The sim holds every chunk and sends the stream at its end: what a client starved of CPU reads.
    window = aa_window(make_plan, "--fault", "burst-delivery", model="burst-a")
    streams = [s for s in read_jsonl(window / "streams.jsonl") if s["repeat"] > 0]
    assert streams and all(s["client_timing_trusted"] is False for s in streams)
    assert all("the server's counters imply" in s["client_timing_problem"] for s in streams)
    # Chunks read back to back: the client parses ~0.1 ms a chunk, so a burst spans a few ms, not 1 ms.
    assert all(s["largest_burst_chunks"] >= 10 for s in streams)
    rows = read_jsonl(window / "pooled.jsonl")
    assert all(r["decode_tps"] is None and r["ttft_s"] is None and r["client_streams"] == 0 for r in rows)
    assert all(r["client_problem"].startswith(f"{r['streams']} of {r['streams']} streams' client timing") for r in rows)
    decision = json.loads((window / "decision.json").read_text())
    cell = decision["cells"][0]
    assert decision["verdict"] == cell["verdict"] == "INCONCLUSIVE"  # never a silent pass, never a LOSS
    places = ", ".join(f"s{s} repeat {r}" for s in (1, 2, 3) for r in (1, 2))
    assert cell["reasons"][0].startswith(f"decode_tps unobserved in {places} (s1 repeat 1: 4 of 4 streams' client")
    assert cell["reasons"][0].endswith("; win2-v1 needs it")
    summary = (window / "summary.md").read_text()
    assert "| s1 | short-b1 | 0 of 8 |" in summary
    sidecar = read_jsonl(window / "starts" / "s1" / "chunks.jsonl")
    everything = read_jsonl(window / "streams.jsonl")  # the warm-up stream and waves too
    assert len(sidecar) == len([s for s in everything if s["start"] == "s1"])
    assert all(row["format"] == "fairwin.chunks/1" and row["arrivals_ms"] for row in sidecar)


@pytest.mark.slow
@pytest.mark.alone  # the client's and the server's clocks agree within 10 % only where neither waits for a CPU:
# beside six workers the nice-10 sim was descheduled between a chunk and its clock often enough for 50 to 70 ms
# (0.41 and 0.53 s against the server's 0.46), which the product rightly calls untrusted (2 of 3 runs, 2026-12-06)
def test_the_servers_own_per_request_timing_checks_every_stream(make_plan: PlanFactory) -> None:
    # Rounds of 20 ms from a server at nice 10: a client that waits for a CPU on a busy machine waits well under
    # the run-queue ceiling of any stream, so the server's own timing is what every stream is checked against. No
    # warm-up waves: a sim's rate is steady from its first (two waves, 1.9 s a start, 5.7 s of a 19-s window), and
    # what this checks is each stream's two clocks, the warm-up stream still paying any first request's costs.
    window = aa_window(
        make_plan, "--per-request-metrics", model="own-a", ms_per_round=20, nice=10, tokens=24, warmup_waves=0
    )
    streams = [s for s in read_jsonl(window / "streams.jsonl") if s["repeat"] > 0]
    assert len(streams) == 24  # 3 starts, 2 repeats, 4 streams each
    for s in streams:
        on_wire = s["last_token_s"] + s["done_gap_s"]
        assert s["chunk_gaps_ms"]["p50"] > 0 and s["done_gap_s"] >= 0
        assert s["client_runqueue_wait_s"] < RUNQUEUE_CEILING * on_wire, s
        server_s = s["server_timing"]["generation_time_ms"] / 1000
        client_s = s["last_token_s"] - s["first_token_s"]
        assert client_s == pytest.approx(server_s, rel=0.10)
        assert s["client_timing_trusted"] is True
    rows = read_jsonl(window / "pooled.jsonl")
    for r in rows:  # every repeat's client metrics pool, and its decode time is the server's
        assert r["streams"] == r["client_streams"] == 4 and r["client_problem"] is None
        assert r["server_stream_decode_s"] == pytest.approx(r["client_decode_s"], rel=0.05)


@pytest.mark.slow
def test_a_role_runs_on_its_cpus_at_its_priority(make_plan: PlanFactory) -> None:
    cpu = sorted(os.sched_getaffinity(0))[0]
    plan = make_plan(
        roles={"A": sim_role("--ms-per-round", "2", model="pinned-a", cpus=str(cpu), nice=7)},
        modes={"aa": {"control": "A", "candidate": "A"}},
        window={"repeats": 2, "idle_check_s": 0.1},
    )
    done = fairwin("run", str(plan), "--mode", "aa")
    assert done.returncode == 0, done.stderr
    window = only_window(plan)
    start = json.loads((window / "starts" / "s1" / "start.json").read_text())
    scheduling = start["scheduling"]
    assert scheduling["cpus"] == str(cpu) and scheduling["server_cpus"] == str(cpu) and scheduling["nice"] == 7
    autogroup_on = Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    expected = "autogroup nice 7" if autogroup_on else "autogroup off: the process nice applies"
    assert scheduling["autogroup"] == expected
    for reading in (start["host_before"], start["host_after"]):
        assert isinstance(reading["idle"], bool) and reading["memory_available_gib"] > 0
        assert reading["client_cpus"] and len(reading["load_average"]) == 3
    assert processes_with("pinned-a") == []


def test_cpus_the_machine_does_not_offer_are_refused_before_anything_starts(make_plan: PlanFactory) -> None:
    plan = make_plan(
        roles={"A": sim_role(model="nocpu-a", cpus="4096")}, modes={"aa": {"control": "A", "candidate": "A"}}
    )
    done = fairwin("run", str(plan), "--mode", "aa")
    assert done.returncode == 2, done.stderr
    assert "roles.A.cpus = '4096' names CPU(s) [4096] that this machine does not offer" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (plan.parent / "windows").exists()
