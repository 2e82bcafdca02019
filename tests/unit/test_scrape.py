from __future__ import annotations

import pytest

from fairwin.errors import MetricsError
from fairwin.metrics.scrape import delta, parse_snapshot

# Shape copied from a vLLM 0.32 CPU server's /metrics (values changed).
VLLM_TEXT = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 3.0
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{engine="0",model_name="tiny"} 1.7959712305690923e+09
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="0"} 3.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="1"} 2.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="tiny"} 12.0
vllm:generation_tokens_total{engine="1",model_name="tiny"} 8.0
vllm:generation_tokens_total{engine="0",model_name="other"} 100.0
# HELP vllm:request_decode_time_seconds Histogram of time spent in DECODE phase for request.
# TYPE vllm:request_decode_time_seconds histogram
vllm:request_decode_time_seconds_sum{engine="0",model_name="tiny"} 0.026
vllm:request_decode_time_seconds_bucket{engine="0",le="0.3",model_name="tiny"} 1.0
vllm:request_decode_time_seconds_bucket{engine="0",le="+Inf",model_name="tiny"} 1.0
vllm:request_decode_time_seconds_count{engine="0",model_name="tiny"} 1.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 0.0
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 4.2
"""


def test_snapshot_keeps_counters_sums_over_engines_and_filters_model() -> None:
    snap = parse_snapshot(VLLM_TEXT, model="tiny")
    assert snap == {
        "vllm:spec_decode_num_drafts_total": 3.0,
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"}': 3.0,
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1"}': 2.0,
        "vllm:generation_tokens_total": 20.0,
        "vllm:request_decode_time_seconds_sum": 0.026,
        "vllm:request_decode_time_seconds_count": 1.0,
    }


def test_snapshot_without_model_sums_everything() -> None:
    assert parse_snapshot(VLLM_TEXT)["vllm:generation_tokens_total"] == 120.0


def test_delta_and_restart_detection() -> None:
    assert delta({"a": 1.0}, {"a": 4.0, "b": 2.0}) == {"a": 3.0, "b": 2.0}
    with pytest.raises(MetricsError, match="went down"):
        delta({"a": 5.0}, {"a": 1.0})


def test_garbage_is_a_metrics_error() -> None:
    with pytest.raises(MetricsError, match="not Prometheus text"):
        parse_snapshot("vllm:x{ 1 2 3\n")
