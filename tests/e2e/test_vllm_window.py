"""Whole windows on a real vLLM for CPU."""

from __future__ import annotations

import pytest

from fairwin.metrics.pool import ACCEPTED, DECODE_COUNT, DECODE_SUM, DRAFTS, GENERATION, PREFIX_HITS
from tests.e2e.conftest import Window

pytestmark = pytest.mark.e2e


def test_every_stream_is_exactly_max_tokens_with_prompts_at_target_length(spec_window: Window) -> None:
    plan_cells = {"short-b1": 256, "long-b1": 4096}
    streams = [s for s in spec_window.jsonl("streams.jsonl") if s["wave"] != "warmup"]
    assert len(streams) == 3 * 3 * (2 * 2 + 2 * 1)  # starts x repeats x (families x streams per wave)
    for s in streams:
        assert s["ok"] and s["completion_tokens"] == s["max_tokens"] == 128, s
        assert s["finish_reason"] == "length"
        # The server's own count of the prompt it received, against the cell's target.
        target = plan_cells[s["cell"]]
        assert target - 8 <= s["prompt_tokens"] <= target, s
        assert s["prompt_tokens"] == s["prompt_tokens_expected"]
    assert len({s["cache_salt"] for s in streams}) == len(streams)


def test_speculative_counters_move_only_for_the_speculative_role(spec_window: Window) -> None:
    waves = spec_window.jsonl("waves.jsonl")
    for wave in waves:
        deltas = wave["deltas"]
        if wave["role"] == "B":
            assert deltas[DRAFTS] > 0 and deltas[ACCEPTED] > 0, wave["wave"]
        else:
            assert deltas.get(DRAFTS, 0) == 0 and deltas.get(ACCEPTED, 0) == 0, wave["wave"]


def test_pooled_rate_recomputes_from_the_stored_raw_deltas(spec_window: Window) -> None:
    waves = spec_window.jsonl("waves.jsonl")
    rows = spec_window.jsonl("pooled.jsonl")
    assert len(rows) == 3 * 2 * 3  # starts x cells x repeats
    for row in rows:
        mine = [
            w["deltas"]
            for w in waves
            if (w["start"], w["cell"], w["repeat"]) == (row["start"], row["cell"], row["repeat"])
        ]
        assert len(mine) == 2  # one wave per family
        generation = sum(d[GENERATION] for d in mine)
        first = sum(d[DECODE_COUNT] for d in mine)
        accepted = sum(d.get(ACCEPTED, 0.0) for d in mine)
        decode_s = sum(d[DECODE_SUM] for d in mine)
        rounds = generation - first - accepted
        assert row["rounds"] == pytest.approx(rounds)
        assert row["pooled_rate_tps"] == pytest.approx((rounds + accepted) / decode_s, rel=1e-12)
        assert row["accepted_per_round"] == pytest.approx(accepted / rounds)


def test_no_prefix_cache_hits_across_starts(spec_window: Window) -> None:
    waves = spec_window.jsonl("waves.jsonl")
    assert all(PREFIX_HITS in w["deltas"] for w in waves)  # vLLM exposes it; the salts must keep it at zero
    assert sum(w["deltas"][PREFIX_HITS] for w in waves) == 0


def test_the_speculative_candidate_wins_at_temperature_zero(spec_window: Window) -> None:
    decision = spec_window.json("decision.json")
    assert spec_window.json("status.json")["state"] == "complete"
    assert decision["verdict"] == "WIN", [c["reasons"] for c in decision["cells"]]
    assert "verdict: WIN" in spec_window.stdout


def test_an_identical_candidate_does_not_win(aa_window: Window) -> None:
    decision = aa_window.json("decision.json")
    assert decision["verdict"] != "WIN", [c["reasons"] for c in decision["cells"]]
    assert [s["role"] for s in aa_window.json("window.json")["starts"]] == ["B", "B", "B"]
