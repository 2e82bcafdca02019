"""The client-timing trust rule, the chunk timeline and the run-queue clock, by hand."""

from __future__ import annotations

import pytest

from fairwin.client.runqueue import RunqueueClock, runqueue_wait_s
from fairwin.client.stream import StreamRecord
from fairwin.client.timeline import Timeline
from fairwin.pooling.fidelity import implied_decode_times, judge_stream, judge_wave, trusted
from fairwin.pooling.pool import pool_repeat
from tests.unit.test_pool import stream, wave


def timed(
    first: float,
    last: float,
    *,
    server_ms: float | None = None,
    waited: float | None = None,
    done_gap: float = 0.001,
    tokens: int = 9,
    index: int = 0,
) -> StreamRecord:
    record = stream(first, last, tokens).model_copy(update={"stream": index})
    record.server_timing = None if server_ms is None else {"generation_time_ms": server_ms}
    record.client_runqueue_wait_s = waited
    record.done_gap_s = done_gap
    return record


def test_timeline_summary_by_hand() -> None:
    timeline = Timeline()
    for at in (0.010, 0.012, 0.0125, 0.0128, 0.020):
        timeline.add(at, None)
    timeline.done_s = 0.025
    assert timeline.largest_burst() == 3  # 12.0, 12.5, 12.8 ms lie within 1 ms
    gaps = timeline.gaps_ms()
    assert (
        gaps is not None and gaps["max"] == pytest.approx(7.2) and gaps["p50"] == pytest.approx(1.25)
    )  # gaps 2.0, 0.5, 0.3, 7.2
    assert timeline.done_gap_s() == pytest.approx(0.005)
    row = timeline.sidecar_row("s1", "c/r1/f", 0).stored()
    assert row["arrivals_ms"] == [10.0, 12.0, 12.5, 12.8, 20.0] and row["tokens"] is None and row["done_ms"] == 25.0


def test_a_healthy_stream_is_trusted() -> None:
    assert judge_stream(timed(0.01, 0.09, server_ms=82.0, waited=0.002), implied_decode_s=0.085) is None


def test_against_the_servers_own_clock() -> None:
    problem = judge_stream(timed(0.01, 0.09, server_ms=100.0), implied_decode_s=None)
    assert problem is not None and "80.0 ms vs the server's own 100.0 ms (0.80x; tolerance 10%)" in problem
    assert judge_stream(timed(0.01, 0.09, server_ms=88.0), implied_decode_s=None) is None  # 0.91x


def test_a_burst_against_the_servers_counters() -> None:
    # The whole stream read in 0.3 ms where the counters say the server spent 80 ms decoding it.
    problem = judge_stream(timed(0.0850, 0.0853), implied_decode_s=0.080)
    assert problem is not None and "under half the 80.0 ms the server's counters imply" in problem
    assert judge_stream(timed(0.01, 0.05), implied_decode_s=0.080) is None  # exactly half: not under it


def test_a_starved_client_is_named_as_the_cause() -> None:
    problem = judge_stream(timed(0.0850, 0.0853, waited=0.084), implied_decode_s=None)
    assert problem is not None and "waited 84.0 ms for a CPU" in problem
    # 20 % of the time on the wire is the ceiling: 17 ms of 86.3 ms is under it.
    assert judge_stream(timed(0.0850, 0.0853, waited=0.017), implied_decode_s=None) is None


def test_implied_decode_times_split_the_wave_by_tokens() -> None:
    streams = [timed(0.0, 0.1, tokens=9), timed(0.0, 0.1, tokens=3)]
    assert implied_decode_times(streams, 1.0) == pytest.approx([0.8, 0.2])
    assert implied_decode_times(streams, None) == [None, None]


def test_pooling_keeps_only_trusted_streams() -> None:
    good = [timed(0.01, 0.09, index=i) for i in range(3)]
    burst = timed(0.0850, 0.0853, index=3)
    streams = [*good, burst]
    judge_wave(streams, server_decode_s=0.32)  # 80 ms a stream
    assert [s.client_timing_trusted for s in streams] == [True, True, True, False]
    row = pool_repeat(
        window_id="w",
        start="s1",
        kind="control",
        role="A",
        cell="c",
        repeat=1,
        deltas=[wave(36, 4, 0, 0.32)],
        streams=streams,
    )
    assert row.client_streams == 3 and row.client_problem is None
    assert row.decode_tps == pytest.approx(24 / 0.24)  # 3 streams x 8 tokens in 3 x 80 ms; the burst is left out
    assert row.ttft_s == pytest.approx(0.01)


def test_a_repeat_with_too_few_trusted_streams_has_no_client_metrics() -> None:
    streams = [timed(0.01, 0.09, index=0), timed(0.0850, 0.0853, index=1), timed(0.0851, 0.0852, index=2)]
    judge_wave(streams, server_decode_s=0.24)
    row = pool_repeat(
        window_id="w",
        start="s1",
        kind="control",
        role="A",
        cell="c",
        repeat=1,
        deltas=[wave(27, 3, 0, 0.24)],
        streams=streams,
    )
    assert row.decode_tps is None and row.ttft_s is None and row.client_streams == 0
    assert row.client_problem is not None and row.client_problem.startswith("2 of 3 streams' client timing untrusted")
    assert row.pooled_rate_tps == pytest.approx(24 / 0.24)  # the server's side is untouched


def test_streams_judged_before_the_rule_existed_pool_as_they_did() -> None:
    old = [stream(0.1, 0.5), stream(0.1, 0.3)]
    kept, problem = trusted(old)
    assert kept == old and problem is None


def test_runqueue_clock_reads_the_kernel() -> None:
    start = runqueue_wait_s()
    assert start is not None and start >= 0  # Linux with schedstat, as CI is
    elapsed = RunqueueClock().elapsed()
    assert elapsed is not None and elapsed >= 0


def test_cpu_lists_parse_or_refuse() -> None:
    from fairwin.launch.scheduling import Scheduling
    from fairwin.plan.cpus import parse_cpu_list

    assert parse_cpu_list("0-2,5") == {0, 1, 2, 5} and parse_cpu_list("3") == {3}
    for bad in ("", "a", "0-", "1,,2", "0 1"):
        with pytest.raises(ValueError, match="is not a CPU list"):
            parse_cpu_list(bad)
    prefix = Scheduling(cpus="1", nice=10).command_prefix("A")
    assert prefix[0].endswith("taskset") and prefix[1:3] == ["--cpu-list", "1"]
    assert prefix[3].endswith("nice") and prefix[4:] == ["-n", "10"]
    assert Scheduling().command_prefix("A") == []


def test_warm_up_stops_when_two_consecutive_rates_agree() -> None:
    from fairwin.pooling.pool import decode_rate
    from fairwin.profiles import CLIENT_ONLY, VLLM
    from fairwin.window.warmup import steady

    # 2 requests of 65 tokens: 128 tokens after the first in 0.1 s of decode.
    deltas = {VLLM.generation: 130.0, VLLM.requests: 2.0, VLLM.decode_sum: 0.1}
    assert decode_rate(deltas) == pytest.approx(1280.0)
    assert decode_rate(deltas, CLIENT_ONLY) is None  # a profile reading no counters has no server rate
    assert decode_rate({**deltas, VLLM.decode_sum: 0.0}) is None
    assert not steady([1387.0], 3.0)
    assert not steady([1387.0, 1634.0], 3.0)  # +17.8 %: still climbing
    assert steady([1387.0, 1634.0, 1680.0], 3.0)  # +2.8 %
    assert not steady([1634.0, 1690.0], 3.0)  # +3.4 %
