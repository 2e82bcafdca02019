"""Shared fixtures: small prompt families and plans that run against `fairwin sim`."""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fairwin.cli import GC_YOUNG_THRESHOLD
from fairwin.files import sha256_file
from fairwin.formats import ORDER
from fairwin.redaction import forget_all

# Each pytest process (the controller and every xdist worker) collects every test module, and with them most of
# fairwin's: the young-generation threshold `fairwin` itself runs with (cli/__init__.py) took collection from 6.6
# to 4.6 CPU-seconds a process, and the windows tests run in-process gain the same as the command's.
gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])

WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "an",
    "were",
    "are",
    "which",
    "this",
    "be",
    "or",
]


def write_family(directory: Path, name: str, count: int = 6, words: int = 1500, seed: int = 0) -> dict[str, str]:
    """A family of `count` prompts of `words` words each; returns its plan table."""
    rng = random.Random(f"{name}:{seed}")
    prompts = directory / f"{name}.jsonl"
    with prompts.open("w") as handle:
        for i in range(count):
            text = " ".join(rng.choice(WORDS) for _ in range(words))
            handle.write(json.dumps({"id": f"{name}-{i}", "text": text}) + "\n")
    order = directory / f"{name}.order.json"
    ids = [f"{name}-{i}" for i in range(count)]
    rng.shuffle(ids)
    order.write_text(json.dumps({"format": ORDER.id, "family": name, "ids": ids}))
    return {
        "prompts": prompts.name,
        "prompts_sha256": sha256_file(prompts),
        "order": order.name,
        "order_sha256": sha256_file(order),
    }


def sim_role(*flags: str, model: str = "tiny", **overrides: Any) -> dict[str, Any]:
    role: dict[str, Any] = {
        "argv": ["{python}", "-m", "fairwin", "sim", "--port", "{port}", "--model", model, *flags],
        "base_url": "http://127.0.0.1:{port}",
        "port": "auto",
        "served_model": model,
        "startup_timeout_s": 20,
        "stop_timeout_s": 5,
    }
    role.update(overrides)
    return role


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items() if v is not None) + "}"
    raise TypeError(value)


def to_toml(data: dict[str, Any]) -> str:
    """Enough TOML for plans: top-level tables of scalars, and tables of tables."""
    lines: list[str] = []
    for section, body in data.items():
        scalars = {k: v for k, v in body.items() if not isinstance(v, dict) or section in ("window", "budget")}
        tables = {k: v for k, v in body.items() if k not in scalars}
        if scalars:
            lines.append(f"[{section}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in scalars.items() if v is not None]
        for name, table in tables.items():
            lines.append(f'[{section}."{name}"]')
            lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
        lines.append("")
    return "\n".join(lines)


PlanFactory = Callable[..., Path]

#: Where benchmarks/suite_time.py has each pytest session of `make test` append its wall time and each test's
#: seconds (setup, call and teardown together); unset, nothing is recorded.
SUITE_TIMES_ENV = "FAIRWIN_SUITE_TIMES"
_session_began: list[float] = []
_test_seconds: dict[str, float] = {}


def pytest_sessionstart(session: pytest.Session) -> None:
    _session_began.append(time.monotonic())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Under pytest-xdist this runs in the controller, with every worker's reports.
    if os.environ.get(SUITE_TIMES_ENV):
        _test_seconds[report.nodeid] = _test_seconds.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    _record_skips(session)
    target = os.environ.get(SUITE_TIMES_ENV)
    if not target or not _session_began or hasattr(session.config, "workerinput"):  # an xdist worker: not its
        return
    row = {
        "args": [str(arg) for arg in session.config.invocation_params.args],
        "wall_s": time.monotonic() - _session_began[0],
        "tests": _test_seconds,
    }
    with Path(target).open("a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")


#: Where `make test` has each pytest session append the tests it skipped, a line each: 'NODEID: reason'.
SKIPS_ENV = "FAIRWIN_SKIPS"


def _record_skips(session: pytest.Session) -> None:
    target = os.environ.get(SKIPS_ENV)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if not target or reporter is None or hasattr(session.config, "workerinput"):  # an xdist worker: not its
        return
    lines = []
    for report in reporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        lines.append(f"{report.nodeid}: {reason.removeprefix('Skipped: ')}\n")
    with Path(target).open("a", encoding="utf-8") as out:
        out.writelines(lines)


#: The files whose tests take longest in all (seconds summed over their tests, make test's unit and integration
#: part on 2 cores, 2026-12-05: 157 to 38), handed to the xdist workers first, the rest after in collection order
#: (the Makefile turns off xdist's own order, most tests first, which left the one-test runbook's day, 98 s, to
#: start last and run on alone): each file runs on one worker (--dist loadfile), the longest first.
LONGEST_FIRST = (
    "tests/integration/test_runbook_day.py",  # one test of 105 to 125 s: started late, it is the part's tail
    "tests/integration/test_cluster_production.py",  # 70 s, most of it waiting on Slurm (2026-12-05)
    "tests/integration/test_cluster.py",  # 70 s, most of it waiting on Slurm's 30-s check of time limits
    "tests/integration/test_cluster_chain.py",  # 7 chains, about 90 s, mostly waiting on Slurm (2026-12-06)
    "tests/integration/test_many_arms.py",  # 75 s, most of it one window
    "tests/integration/test_hosts.py",
    "tests/integration/test_production.py",
    "tests/integration/test_chain.py",
    "tests/integration/test_window_sim.py",
    "tests/integration/test_telemetry.py",
    "tests/integration/test_containers.py",
    "tests/integration/test_secrets.py",
    "tests/integration/test_identity.py",
    "tests/integration/test_archive_import_map.py",
    "tests/integration/test_production_exits.py",
    "tests/integration/test_window_archive.py",
    "tests/integration/test_greedy.py",  # 39 s of 10-ms rounds, mostly waiting (2026-12-06)
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # make test-fast runs no test marked alone (it would need a pytest session of its own, one that collects
    # everything to find it): so a test that needs the machine to itself is a slow one too.
    lone = [item.nodeid for item in items if item.get_closest_marker("alone") and not item.get_closest_marker("slow")]
    if lone:
        raise pytest.UsageError(f"marked alone but not slow (make test-fast would not run them): {', '.join(lone)}")
    first = {path: rank for rank, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: first.get(item.nodeid.split("::")[0], len(first)))  # stable: the rest in order


def pytest_configure(config: pytest.Config) -> None:
    # Each window states its rule's audited error rates; 100 simulated windows instead of 1,000 save one to two
    # seconds a window, and the statement names its trials. A test of the audit itself passes its own --trials.
    os.environ.setdefault("FAIRWIN_AUDIT_TRIALS", "100")
    # This machine's hardware locks, for the windows a module's fixture runs: one directory per pytest process
    # (each xdist worker its own), since tests run windows side by side on purpose; each test gets its own below.
    os.environ["FAIRWIN_LOCK_DIR"] = tempfile.mkdtemp(prefix="fairwin-test-locks-")


def pytest_unconfigure(config: pytest.Config) -> None:
    # The process's lock directory goes with it (every xdist worker, every session, every `make bytecode`
    # collection made one: 182 were left in /tmp after a day's runs).
    shutil.rmtree(os.environ.pop("FAIRWIN_LOCK_DIR", ""), ignore_errors=True)


@pytest.fixture(autouse=True)
def scratch_chain_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test's chain marker is its own scratch file: a live chain on this machine is never touched."""
    path = tmp_path / "scratch-chain.json"
    monkeypatch.setenv("FAIRWIN_CHAIN_MARKER", str(path))
    return path


@pytest.fixture(autouse=True)
def own_fake_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test's servers run on stand-in GPUs of its own (tests/fixtures/nvidia-smi lists only the servers of
    its own FAKE_GPU_SCOPE): a test's stray job on the GPUs is never another test's, whatever runs beside it.
    Commands over SSH carry it too (tests/integration/sshd.py sets it in the test's sshd)."""
    monkeypatch.setenv("FAKE_GPU_SCOPE", str(tmp_path))


@pytest.fixture(autouse=True)
def scratch_machine_locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test's machine-wide hardware locks live in its own directory: tests run side by side on one machine,
    and a window a test runs never waits on another test's (nor on a real window here)."""
    path = tmp_path / "machine-locks"
    monkeypatch.setenv("FAIRWIN_LOCK_DIR", str(path))
    return path


@pytest.fixture(autouse=True)
def no_team_archive(monkeypatch: pytest.MonkeyPatch) -> None:
    """A team's shared archive named in the environment is never written by a test: each test says its own."""
    monkeypatch.delenv("FAIRWIN_ARCHIVE_URL", raising=False)


@pytest.fixture(autouse=True)
def forget_secrets() -> Iterator[None]:
    """Secrets one test resolved are not scrubbed from the next test's files."""
    yield
    forget_all()


@pytest.fixture
def make_plan(tmp_path: Path) -> PlanFactory:
    """Write a plan for sim roles; keyword arguments replace whole sections or add keys."""
    return plan_factory(tmp_path)


def plan_factory(tmp_path: Path) -> PlanFactory:
    """:func:`make_plan`'s factory, for a fixture of wider scope that writes into a directory of its own."""

    def factory(
        roles: dict[str, Any] | None = None,
        cells: dict[str, Any] | None = None,
        window: dict[str, Any] | None = None,
        modes: dict[str, Any] | None = None,
        name: str = "plan.toml",
        production: dict[str, Any] | None = None,
        chain: dict[str, Any] | None = None,
    ) -> Path:
        families = {"prose": write_family(tmp_path, "prose"), "code": write_family(tmp_path, "code")}
        data: dict[str, Any] = {
            # win2-v1 unless a test asks otherwise: three starts keep the window tests quick; rule=None: the default.
            # No report.html unless a test reads it: its figures cost a second of CPU a window (about 150 windows).
            "window": {
                "output_dir": "windows",
                "repeats": 3,
                "idle_check_s": 0,
                "rule": "win2-v1",
                "report_html": False,
                **(window or {}),
            },
            "budget": {"startup_s": 1, "stop_s": 1, "decode_ms_per_token": 2},
            "roles": roles
            or {
                "A": sim_role("--ms-per-round", "2"),
                "B": sim_role("--ms-per-round", "2", "--spec-tokens", "4", "--acceptance", "0.8,0.6,0.5,0.4"),
            },
            "families": families,
            "cells": cells
            or {
                "short-b1": {
                    "families": ["prose", "code"],
                    "prompt_tokens": 64,
                    "max_tokens": 48,
                    "streams_per_wave": 2,
                }
            },
        }
        if modes is not None:
            data["modes"] = modes
        if production is not None:
            # Each test's own lock file on a remote production's host (the hosts are loopback: one home for all).
            data["production"] = {"hardware_lock": str(tmp_path / "hardware.lock"), **production}
        if chain is not None:
            data["chain"] = chain
        path = tmp_path / name
        path.write_text(to_toml(data))
        return path

    return factory


@pytest.fixture(scope="session")
def boundaries_tool() -> Any:
    """tools/sequential_boundaries.py, loaded as a module: how the registered rules' look levels were computed."""
    path = Path(__file__).resolve().parents[1] / "tools" / "sequential_boundaries.py"
    spec = importlib.util.spec_from_file_location("sequential_boundaries", path)
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    sys.modules["sequential_boundaries"] = tool
    spec.loader.exec_module(tool)
    return tool
