"""End-to-end fixtures: real vLLM (CPU build) server processes serving the tiny local model.

`make test` installs the engine (engine/install.sh) and exports its paths. Where the
engine is missing, every test here fails under `make test` and CI, naming why (tests/components.py).
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fairwin.files import sha256_file
from tests.components import missing
from tests.conftest import to_toml
from tests.integration.slurm import slurm_cluster

__all__ = ["slurm_cluster"]  # the test cluster, for the llama.cpp window submitted to Slurm

REPO = Path(__file__).resolve().parents[2]
PROMPTS = REPO / "examples" / "prompts"
NGRAM = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}'
#: Each start's repeats of every cell: the rule's least (docs/decision.md, "Repeats"). The verdicts these windows
#: reach rest on the launch-to-launch spread; a third repeat cost 5 s an A start (512-token streams at about 1.5 ms
#: a token, unspeculated) and 1.4 s a B start.
REPEATS = 2


@dataclass(frozen=True)
class Engine:
    python: Path
    model: Path


@pytest.fixture(scope="session", autouse=True)
def engine_scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A TMPDIR of the session's own for every process the e2e tests start: vLLM leaves its engine's IPC sockets
    (``ipc://$TMPDIR/<uuid>``) and a ``vllm_dist_*`` file behind when it is stopped, and 210 and 70 of them had
    gathered in /tmp after a day's runs. torch's compiled kernels and precompiled headers (about 150 MB, in
    ``$TMPDIR/torchinductor_USER`` whatever TORCHINDUCTOR_CACHE_DIR says for the headers) stay shared across
    sessions through a link: built again in each session, they cost the first start's first request 8 s."""
    kernels = Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}"
    kernels.mkdir(exist_ok=True)
    path = tmp_path_factory.mktemp("engine-tmp")
    (path / kernels.name).symlink_to(kernels)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(path))
        yield path


@pytest.fixture(scope="session")
def engine() -> Engine:
    python, model = os.environ.get("FAIRWIN_ENGINE_PYTHON"), os.environ.get("FAIRWIN_TINY_MODEL")
    if not python or not model or not Path(python).is_file() or not (Path(model) / "config.json").is_file():
        missing(
            "vLLM for CPU",
            "FAIRWIN_ENGINE_PYTHON / FAIRWIN_TINY_MODEL are unset or missing; run `make test` (it runs "
            "engine/install.sh) or `eval $(bash engine/install.sh)`",
            installable=False,
        )
    return Engine(Path(python), Path(model))


def vllm_argv(*extra: str, max_model_len: int = 8192) -> list[str]:
    # --enforce-eager: no torch.compile at start-up; the tests measure fairwin, not the engine.
    # --distributed-executor-backend uni: the one worker runs in the engine core's process, which imports torch
    # and vLLM twice instead of three times. vLLM 0.32's OpenAI server still runs its engine core as a process of
    # its own (spawned: its CPU platform forces spawn, VLLM_ENABLE_V1_MULTIPROCESSING notwithstanding), and
    # those two imports are nearly all of a start-up: healthy after 13.6 to 13.8 s (start receipts, 2026-12-04).
    # --enable-per-request-metrics: every stream's own server decode time, to hold the client's against.
    return [
        "{env:FAIRWIN_ENGINE_PYTHON}",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "{env:FAIRWIN_TINY_MODEL}",
        "--served-model-name",
        "tiny",
        "--load-format",
        "dummy",
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
        "--max-model-len",
        str(max_model_len),
        "--dtype",
        "bfloat16",
        "--seed",
        "0",
        "--enforce-eager",
        "--distributed-executor-backend",
        "uni",
        "--enable-per-request-metrics",
        *extra,
    ]


def vllm_role(*extra: str) -> dict[str, Any]:
    return {
        "argv": vllm_argv(*extra),
        "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"},
        "base_url": "http://127.0.0.1:{port}",
        "port": "auto",
        "served_model": "tiny",
        "startup_timeout_s": 300,
        # The server's busy threads otherwise keep the client off both cores for whole streams (docs/fidelity.md).
        "nice": 10,
    }


ROLES = {"A": vllm_role(), "B": vllm_role("--speculative-config", NGRAM)}


def e2e_plan(directory: Path, greedy: bool = True, max_starts: int | None = None) -> Path:
    """The e2e plan; ``greedy``: with the greedy diagnostics (vLLM for CPU answers a 32-token request with
    logprobs in 10 to 30 s, so only the window whose tests read them runs them); ``max_starts``: the budget's
    cap on the starts, which stops a sequential window that no look settles (the A/A)."""
    families = prompt_families()
    # 256 tokens a stream: vLLM's API server delivers a stream's first chunk later, against its engine's clock,
    # than later ones (0.3 to 7 ms at 256-token prompts, up to 4.7 ms behind a 4,096-token prefill); over 128
    # tokens (about 80 ms of decode) that alone moved a start's client/server ratio by 2.4 % (short-b1) and
    # 5.2 % (long-b1, CI 2026-12-02); over 256 it is about half (docs/fidelity.md).
    cell = {"families": ["prose", "code"], "temperature": 0, "max_tokens": 256}
    data: dict[str, Any] = {
        "window": {"output_dir": "windows", "repeats": REPEATS, "warmup_max_tokens": 8},
        "budget": {"startup_s": 25, "stop_s": 3, "decode_ms_per_token": 2, "prefill_ms_per_token": 0.1},
        "roles": ROLES,
        "modes": {"spec-vs-spec": {"control": "B", "candidate": "B"}},
        "families": families,
        "cells": {
            # 512 here: behind a 256-token prompt the lag was 2 to 5 ms a stream in every start of an A/A window
            # (CI, 2026-12-02: a start's client/server 0.968 to 0.997 over 256-token streams of about 120 ms).
            "short-b1": {**cell, "prompt_tokens": 256, "streams_per_wave": 2, "max_tokens": 512},
            "long-b1": {**cell, "prompt_tokens": 4096, "streams_per_wave": 1},
        },
    }
    if greedy:  # after the first start of each kind: greedy streams with their top-2 logprobs (docs/greedy.md)
        data["diagnostics"] = {
            "greedy": {"on": ["control", "candidate"], "cells": ["short-b1"], "prompts": 2, "max_tokens": 32}
        }
    if max_starts is not None:
        data["budget"]["max_starts"] = max_starts
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "e2e.toml"
    path.write_text(to_toml(data))
    return path


@dataclass(frozen=True)
class Window:
    path: Path
    stdout: str

    def jsonl(self, name: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.path / name).read_text().splitlines() if line]

    def json(self, name: str) -> Any:
        return json.loads((self.path / name).read_text())


#: Under the window tests' own pytest timeout (WINDOW_TEST_TIMEOUT_S): a window still running then gets SIGTERM,
#: so that fairwin stops its vLLM and marks the window interrupted (pytest-timeout's kill, or subprocess.run's,
#: would orphan the server). A window takes four to six minutes on CI's usual machine; on a machine 2.5 times
#: slower (2026-12-02: five starts of the controlled window in 531 s, then in over 540 s) it takes up to 15.
WINDOW_TIMEOUT_S = 1080
#: The pytest timeout of a test whose session fixture runs a window (its setup counts): the window's, plus room
#: to stop it and for the test itself.
WINDOW_TEST_TIMEOUT_S = WINDOW_TIMEOUT_S + 120


def run_window(
    engine: Engine, directory: Path, mode: str, greedy: bool = True, max_starts: int | None = None
) -> Window:
    return run_plan(e2e_plan(directory, greedy, max_starts), directory, mode)


def run_plan(plan: Path, directory: Path, mode: str) -> Window:
    """``fairwin run PLAN --mode MODE --quiet``, which must exit 0; the window it made in ``directory``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "fairwin", "run", str(plan), "--mode", mode, "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=WINDOW_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.terminate()
        stdout, stderr = process.communicate(timeout=50)
        raise AssertionError(f"the {mode} window ran past {WINDOW_TIMEOUT_S} s and was stopped: {stderr}") from None
    assert process.returncode == 0, stderr
    (window,) = [p for p in (directory / "windows").iterdir() if p.is_dir()]
    return Window(window, stdout)


def prompt_families() -> dict[str, dict[str, str]]:
    """The example prompts, pinned by their digests."""
    return {
        name: {
            "prompts": str(PROMPTS / f"{name}.jsonl"),
            "prompts_sha256": sha256_file(PROMPTS / f"{name}.jsonl"),
            "order": str(PROMPTS / f"{name}.order.json"),
            "order_sha256": sha256_file(PROMPTS / f"{name}.order.json"),
        }
        for name in ("prose", "code")
    }


@pytest.fixture(scope="session")
def spec_window(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Window:
    """A controlled window: A (no speculation) / B (n-gram, 4 tokens) / A."""
    return run_window(engine, tmp_path_factory.mktemp("spec"), "controlled")


#: An A/A window on this machine rarely reaches NO-CHANGE, so under the default sequential rule it would run its
#: nine starts. What it checks, that an identical candidate is neither a WIN nor a LOSS, the rule's first look
#: checks at its own audited rates; the plan stops it there (a budget of 5 starts), on a machine of any speed (a
#: cap in minutes stopped it after 5, 7 or 9 starts, as the starts ran slow or quick: 189 s in one run here).
AA_MAX_STARTS = 5


@pytest.fixture(scope="session")
def aa_window(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Window:
    """B / B / B: the candidate is the control (no greedy diagnostics: no test of it reads them)."""
    return run_window(
        engine,
        tmp_path_factory.mktemp("aa"),
        "spec-vs-spec",
        greedy=False,
        max_starts=AA_MAX_STARTS,
    )


def assert_client_timing_right_or_flagged(window: Window, fidelity: dict[str, float]) -> None:
    """Every start's client decode time is within ``fidelity`` (by cell) of the server's own for the same streams
    (vLLM's ``generation_time_ms``, llama.cpp's ``predicted_ms``), or flagged with why."""
    streams = [s for s in window.jsonl("streams.jsonl") if s["repeat"] > 0]
    server_ms = [s["server_timing"].get("generation_time_ms", s["server_timing"].get("predicted_ms")) for s in streams]
    assert all(ms is not None and ms > 0 for ms in server_ms)  # every stream carries the server's own timing
    for s in streams:
        assert s["client_timing_trusted"] is (s["client_timing_problem"] is None), s
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in window.jsonl("pooled.jsonl"):
        groups.setdefault((row["start"], row["cell"]), []).append(row)
        flagged = [
            s
            for s in streams
            if (s["start"], s["cell"], s["repeat"]) == (row["start"], row["cell"], row["repeat"])
            and not s["client_timing_trusted"]
        ]
        if row["client_problem"] is None:
            assert len(flagged) == row["streams"] - row["client_streams"], row
        else:
            assert flagged and row["client_streams"] == 0 and row["decode_tps"] is None, row
    for (start, cell), rows in groups.items():
        pooled = [r for r in rows if r["client_streams"]]
        if pooled:
            client_s = sum(r["client_decode_s"] for r in pooled)
            server_s = sum(r["server_stream_decode_s"] for r in pooled)
            assert client_s / server_s == pytest.approx(1.0, abs=fidelity[cell]), (start, cell, client_s, server_s)
