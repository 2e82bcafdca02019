"""Whole windows on a real llama.cpp llama-server (built for this CPU) serving the tiny GGUF.

The roles state their speculation in argv (``--spec-type none``, ``--spec-type ngram-map-k ...``), and the plan
asks for ``window.counters = "auto"``: the first start's /metrics decides that llama.cpp's counters are pooled.
The draft-lengths window's servers decode on both cores (``-t 2``): on one thread (``-t 1``, the A/A window's) a
round that verifies a draft cost about as much per token as plain decoding on the development machine, and the
n-gram candidates gained +8 to +12 % in some windows and about +30 % in others (NEUTRAL in 2 of the last 4
windows); on two, every decoding step pays the threads' synchronisation once, a round verifying
five tokens pays it once too, and the same drafts gained +32 % (WIN at round 3; +40 % in requests timed by
hand). fairwin's client shares those cores; the primary is the server's own decode time.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fairwin.profiles import LLAMACPP
from tests.components import missing
from tests.conftest import to_toml
from tests.e2e.conftest import (  # REPEATS: the rule's least, as on vLLM
    REPEATS,
    WINDOW_TEST_TIMEOUT_S,
    Window,
    assert_client_timing_right_or_flagged,
    prompt_families,
    run_plan,
)
from tests.integration.helpers import processes_with
from tests.integration.slurm import Cluster, fairwin_on

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(WINDOW_TEST_TIMEOUT_S)]

NGRAM = ["--spec-type", "ngram-map-k", "--spec-ngram-map-k-size-n", "2", "--spec-ngram-map-k-size-m", "4"]
#: The same n-gram drafting with drafts of eight tokens: the speculative window's second candidate.
NGRAM_LONG = [*NGRAM[:-1], "8"]
#: Each candidate's speculative config as its start's receipt states it (from argv).
SPECULATIVE = {
    role: {"method": "ngram-map-k", "spec-ngram-map-k-size-n": "2", "spec-ngram-map-k-size-m": drafts}
    for role, drafts in (("B", "4"), ("B8", "8"))
}
CELLS = {"short-b1": (256, 256, 2, 1), "short-b4": (256, 128, 4, 4)}  # prompt, max tokens, streams, concurrency
#: Measured and reported, never deciding: four streams at once are compute-bound, where n-gram drafts gain less
#: (+10 to +20 % on two threads; NEUTRAL, +3 to +10 %, on one, where a window deciding on it ran all nine starts).
REPORTED = {"short-b4"}
#: The same bounds as vLLM's short cell (tests/e2e/test_vllm_window.py); llama.cpp times a request from its
#: prompt's end, a sampling step before the client's first token, far under these.
FIDELITY = {"short-b1": 0.02, "short-b4": 0.02}
#: The A/A window's budget in starts, as on vLLM (tests/e2e/conftest.py): the rule's first look.
AA_MAX_STARTS = 5


@dataclass(frozen=True)
class LlamaEngine:
    server: Path
    model: Path


@pytest.fixture(scope="session")
def llama_engine() -> LlamaEngine:
    server, model = os.environ.get("FAIRWIN_LLAMA_SERVER"), os.environ.get("FAIRWIN_TINY_GGUF")
    if not server or not model or not Path(server).is_file() or not Path(model).is_file():
        missing(
            "llama.cpp's llama-server",
            "FAIRWIN_LLAMA_SERVER / FAIRWIN_TINY_GGUF are unset or missing; run `make test` (it runs "
            "engine/install-llamacpp.sh) or `eval $(bash engine/install-llamacpp.sh)`",
            installable=False,
        )
    return LlamaEngine(Path(server), Path(model))


def llama_role(threads: int, *speculation: str) -> dict[str, Any]:
    argv = ["{env:FAIRWIN_LLAMA_SERVER}", "-m", "{env:FAIRWIN_TINY_GGUF}", "-a", "tiny", "--host", "127.0.0.1"]
    return {
        "argv": [*argv, "--port", "{port}", "-c", "4096", "-np", "4", "-t", str(threads), "--metrics", *speculation],
        "base_url": "http://127.0.0.1:{port}",
        "port": "auto",
        "served_model": "tiny",
        "startup_timeout_s": 60,
    }


def llama_plan(directory: Path, max_starts: int | None = None, reported: bool = True) -> Path:
    """The llama.cpp plan; ``reported``: with the cell that is measured and reported, never deciding."""
    cells = {
        name: {
            "families": ["prose", "code"],
            "temperature": 0,
            "prompt_tokens": prompt,
            "max_tokens": tokens,
            "streams_per_wave": streams,
            "concurrency": concurrency,
            "decision": name not in REPORTED,
        }
        for name, (prompt, tokens, streams, concurrency) in CELLS.items()
        if reported or name not in REPORTED
    }
    data: dict[str, Any] = {
        "window": {"output_dir": "windows", "repeats": REPEATS, "warmup_max_tokens": 16, "counters": "auto"},
        "budget": {"startup_s": 2, "stop_s": 1, "decode_ms_per_token": 5, "prefill_ms_per_token": 0.5},
        "roles": {
            "A": llama_role(2, "--spec-type", "none"),
            "B": llama_role(2, *NGRAM),
            "B8": llama_role(2, *NGRAM_LONG),
            "S": llama_role(1, *NGRAM),
        },
        "modes": {
            "spec-vs-spec": {"control": "S", "candidate": "S"},
            "draft-lengths": {"control": "A", "candidates": ["B", "B8"]},
        },
        "families": prompt_families(),
        "cells": cells,
    }
    if max_starts is not None:
        data["budget"]["max_starts"] = max_starts
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "llamacpp.toml"
    path.write_text(to_toml(data))
    return path


@pytest.fixture(scope="session")
def llama_spec_window(llama_engine: LlamaEngine, tmp_path_factory: pytest.TempPathFactory) -> Window:
    """A many-arm window: A (no speculation) against B and B8 (n-gram drafts of 4 and of 8 tokens), one control's
    launches shared by both, under win-arms-v1 (the two-arm rule's windows are vLLM's and the A/A one here)."""
    directory = tmp_path_factory.mktemp("llama-spec")
    return run_plan(llama_plan(directory), directory, "draft-lengths")


def aa_window(directory: Path) -> Window:
    # Only the deciding cell: what the A/A checks is the decision, and the reported cell's four streams at once
    # (about 4 s a start, 20 s a window) are checked in the speculative window.
    return run_plan(llama_plan(directory, AA_MAX_STARTS, reported=False), directory, "spec-vs-spec")


@pytest.fixture(scope="session")
def llama_aa_window(
    llama_engine: LlamaEngine, slurm_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Window:
    """S against S (n-gram drafts of 4 on one thread): the candidate is the control; submitted as a Slurm job to
    the test cluster's node n1, each llama-server a step of the window's job (docs/cluster.md)."""
    directory = tmp_path_factory.mktemp("llama-aa")
    plan = llama_plan(directory, AA_MAX_STARTS, reported=False)
    plan.write_text(plan.read_text() + '\n[cluster]\nscheduler = "slurm"\nnodes = ["n1"]\n')
    done = fairwin_on(slurm_cluster, "submit", str(plan), "--mode", "spec-vs-spec")
    assert done.returncode == 0, (done.stdout, done.stderr)
    (window,) = [p for p in (directory / "windows").iterdir() if p.is_dir() and not p.name.startswith(".")]
    return Window(window, done.stdout)


def ran_starts(window: Window) -> list[dict[str, Any]]:
    """The planned starts that ran (a many-arm window skips a settled candidate's later turns)."""
    return [s for s in window.json("window.json")["starts"] if (window.path / "starts" / s["start"]).is_dir()]


def test_the_draft_lengths_window_decides_each_candidate_and_names_the_best(llama_spec_window: Window) -> None:
    decision = llama_spec_window.json("decision.json")
    assert llama_spec_window.json("status.json")["state"] == "complete"
    assert decision["rule_id"] == "win-arms-v1" and decision["counters"] == "llamacpp"
    assert decision["primary_source"] == "server"
    # n-gram drafts of a greedy, repetitive output on two threads: about +30 % at one stream, at either draft
    # length (a round that verifies a draft pays the threads' synchronisation once for all its tokens).
    arms = decision["arms"]
    assert {arm["candidate"]: arm["verdict"] for arm in arms["arms"]} == {"B": "WIN", "B8": "WIN"}, arms["arms"]
    assert decision["verdict"] == "WIN" and arms["ended"] == "decided", arms
    # The best is the WIN with the larger effect over every start, and the ranking says whether it is separated.
    ranking = arms["ranking"]
    points = {arm["candidate"]: arm["cells"][0]["primary"]["estimate"]["point_pct"] for arm in arms["arms"]}
    assert {ranking["best"], ranking["runner_up"]} == {"B", "B8"}
    low = ranking["difference_pct"][1]
    assert ranking["separated"] == (low > 0) and ("not separated" in ranking["line"]) == (low <= 0), ranking
    assert ranking["difference_pct"][0] > 0 and points[ranking["best"]] > 0 and points[ranking["runner_up"]] > 0
    # Every round ran the control and each candidate not yet settled: one settled after round r is not launched
    # again (the CI run where B8 won at round 2 ran 8 starts, not whole rounds of three).
    last_round = {arm["candidate"]: arm["settled_after_round"] or arms["rounds_run"] for arm in arms["arms"]}
    planned = llama_spec_window.json("window.json")["starts"]
    expected = [s["start"] for s in planned if s["round"] <= last_round.get(s["role"], arms["rounds_run"])]
    ran = ran_starts(llama_spec_window)
    assert [start["start"] for start in ran] == expected and len(ran) == arms["starts_used"], (ran, arms["arms"])
    for start in ran:
        receipt = llama_spec_window.json(f"starts/{start['start']}/start.json")
        assert receipt["counters"] == "llamacpp", receipt
        assert receipt["counters_reason"].startswith("auto: http://127.0.0.1:"), receipt
        assert receipt["speculative"] == SPECULATIVE.get(start["role"], {}), receipt
        assert receipt["speculative_source"] == "argv"
    assert "## Candidates" in (llama_spec_window.path / "summary.md").read_text()


def test_every_stream_is_exactly_max_tokens_with_prompts_at_target_length(llama_spec_window: Window) -> None:
    streams = [s for s in llama_spec_window.jsonl("streams.jsonl") if s["repeat"] > 0]
    starts = llama_spec_window.json("decision.json")["arms"]["starts_used"]
    assert len(streams) == starts * REPEATS * 2 * sum(streams for _, _, streams, _ in CELLS.values())
    for s in streams:
        prompt, tokens, _, _ = CELLS[s["cell"]]
        assert s["ok"] and s["completion_tokens"] == s["max_tokens"] == tokens, s
        assert s["finish_reason"] == "length"
        assert prompt - 8 <= s["prompt_tokens"] <= prompt and s["prompt_tokens"] == s["prompt_tokens_expected"], s


def test_pooled_rows_recompute_from_the_stored_deltas_with_first_tokens_from_the_streams(
    llama_spec_window: Window,
) -> None:
    waves = llama_spec_window.jsonl("waves.jsonl")
    rows = llama_spec_window.jsonl("pooled.jsonl")
    for row in rows:
        mine = [w for w in waves if (w["start"], w["cell"], w["repeat"]) == (row["start"], row["cell"], row["repeat"])]
        assert len(mine) == 2  # one wave per family
        deltas = [w["deltas"] for w in mine]
        generation = sum(d[LLAMACPP.generation] for d in deltas)
        accepted = sum(d[LLAMACPP.accepted] for d in deltas)
        decode_s = sum(d[LLAMACPP.decode_sum] for d in deltas)
        first = row["streams"]  # llama.cpp counts no requests: each finished stream is one first token
        assert generation == row["streams"] * CELLS[row["cell"]][1]  # exactly the tokens the streams received
        assert row["first_tokens"] == first and row["rounds"] == generation - first - accepted
        assert row["pooled_rate_tps"] == pytest.approx((generation - first) / decode_s, rel=1e-12)
        if row["role"] in SPECULATIVE:
            assert accepted > 0 and sum(d[LLAMACPP.drafts] for d in deltas) > 0, row
        else:
            assert accepted == 0 and sum(d[LLAMACPP.drafts] for d in deltas) == 0, row
    # The prompt cache is off for fairwin's requests (the profile's cache_prompt = false): no prompt reuses a slot's.
    assert sum(w["deltas"][LLAMACPP.prefix_hits] for w in waves) == 0


def test_client_timing_is_right_or_flagged_on_llama_cpp(llama_spec_window: Window, llama_aa_window: Window) -> None:
    assert_client_timing_right_or_flagged(llama_spec_window, FIDELITY)
    assert_client_timing_right_or_flagged(llama_aa_window, FIDELITY)


def test_an_identical_llama_cpp_candidate_is_neither_a_win_nor_a_loss(
    llama_aa_window: Window, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # As on vLLM (tests/e2e/test_vllm_window.py): a window miscalled by chance is followed by a second one.
    decision = llama_aa_window.json("decision.json")
    assert decision["counters"] == "llamacpp"
    assert [s["role"] for s in llama_aa_window.json("window.json")["starts"]] == ["S"] * 9
    assert decision["sequential"]["starts_used"] == AA_MAX_STARTS, decision["sequential"]
    verdicts = [decision["verdict"]]
    if verdicts[0] not in ("NEUTRAL", "NO-CHANGE"):
        verdicts.append(aa_window(tmp_path_factory.mktemp("llama-aa-again")).json("decision.json")["verdict"])
    assert verdicts[-1] in ("NEUTRAL", "NO-CHANGE"), (verdicts, [c["reasons"] for c in decision["cells"]])


def test_the_llama_cpp_window_submitted_to_slurm_ran_each_server_as_a_step_of_its_job(
    llama_engine: LlamaEngine, llama_aa_window: Window
) -> None:
    job = llama_aa_window.json("window.json")["cluster"]["job_id"]
    assert llama_aa_window.json("status.json")["state"] == "complete"
    steps = [
        json.loads(path.read_text())["slurm_step"] for path in sorted(llama_aa_window.path.glob("starts/s*/start.json"))
    ]
    assert steps and all(step.startswith(f"step {job}.") and " on node n1, task pid " in step for step in steps)
    assert processes_with(str(llama_engine.server)) == []  # every step ended with its start
