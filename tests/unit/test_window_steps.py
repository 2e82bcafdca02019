"""The window's steps with an injected launcher: exact order, stops on every path, nothing lost."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from fairwin.directory.start_receipt import StopRecord
from fairwin.errors import ServerExitedError
from fairwin.files import read_jsonl
from fairwin.launch.local import Note
from fairwin.launch.spec import LaunchSpec
from fairwin.plan import load_plan
from fairwin.sim.app import build_app
from fairwin.sim.model import SimConfig
from fairwin.window.run import run_window
from tests.conftest import PlanFactory


class ThreadSim:
    """A server handle whose 'process' is the simulator on a thread: real HTTP, no subprocess."""

    def __init__(self, spec: LaunchSpec, events: list[str], fail_health: bool, log_path: Path) -> None:
        self.spec = spec
        self.log_path = log_path
        self.events = events
        self.fail_health = fail_health
        self.loop = asyncio.new_event_loop()
        self.thread: threading.Thread | None = None
        spec_tokens = 4 if spec.role_name == "B" else 0
        self.config = SimConfig(model=spec.model, spec_tokens=spec_tokens, acceptance=(0.8, 0.6), ms_per_round=1)
        self.scheduling: dict[str, object] | None = None
        self.pid: int | None = None  # no process: the simulator runs on a thread
        self.listens_as = os.getpid()  # whose sockets its ports are: this process's

    async def start(self) -> None:
        self.events.append(f"launch {self.spec.role_name}")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)  # what the sim reports at start-up, as it logs it
        self.log_path.write_text(f"fairwin sim: non-default args: {{'spec_tokens': {self.config.spec_tokens}}}\n")
        port = int(self.spec.base_url.rsplit(":", 1)[1])
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            runner = web.AppRunner(build_app(self.config))
            self.loop.run_until_complete(runner.setup())
            self.loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
            ready.set()
            self.loop.run_forever()
            self.loop.run_until_complete(runner.cleanup())

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        ready.wait(5)

    async def wait_healthy(self, session: aiohttp.ClientSession) -> float:
        if self.fail_health:
            self.events.append(f"exited {self.spec.role_name}")
            raise ServerExitedError(f"role {self.spec.role_name}: server exited with code 1 before it was healthy")
        async with session.get(self.spec.health_url) as response:
            assert response.status == 200
        self.events.append(f"healthy {self.spec.role_name}")
        return 0.01

    async def process_env(self) -> dict[str, str] | None:
        return self.spec.env

    @property
    def expected_env(self) -> dict[str, str]:
        return self.spec.env

    def problem(self) -> str | None:
        return None

    def report_to(self, note: Note) -> None:
        del note  # nothing happens to it that the start does not see itself

    def described(self) -> dict[str, Any] | None:
        return None

    def exit_code(self) -> int | None:
        return None

    async def stop(self) -> StopRecord:
        self.events.append(f"stop {self.spec.role_name}")
        self.loop.call_soon_threadsafe(self.loop.stop)
        if self.thread:
            self.thread.join(5)
        return StopRecord(signal="SIGTERM", returncode=0, seconds=0.0)


def launcher_recording(events: list[str], fail_role: str | None = None):  # type: ignore[no-untyped-def]
    def launch(spec: LaunchSpec, log_path: Path) -> ThreadSim:
        return ThreadSim(spec, events, fail_health=spec.role_name == fail_role, log_path=log_path)

    return launch


STARTS = ("s1", "s2", "s3")


def test_steps_run_in_bracket_order_and_every_server_stops(make_plan: PlanFactory) -> None:
    loaded = load_plan(make_plan(window={"repeats": 2}))
    events: list[str] = []
    result = asyncio.run(run_window(loaded, "controlled", launcher=launcher_recording(events)))
    assert events == [
        "launch A",
        "healthy A",
        "stop A",
        "launch B",
        "healthy B",
        "stop B",
        "launch A",
        "healthy A",
        "stop A",
    ]
    journal = [(e["step"], e["event"]) for e in read_jsonl(result.window.journal)]
    assert journal == [
        ("open", "begin"),
        ("open", "end"),
        ("start s1", "begin"),
        ("start s1", "launching"),
        ("start s1", "launched"),
        ("start s1", "end"),
        ("start s2", "begin"),
        ("start s2", "launching"),
        ("start s2", "launched"),
        ("start s2", "end"),
        ("start s3", "begin"),
        ("start s3", "launching"),
        ("start s3", "launched"),
        ("start s3", "end"),
        ("decide", "begin"),
        ("decide", "end"),
        ("archive", "begin"),
        ("archive", "end"),
        ("budget", "begin"),
        ("budget", "end"),
        ("close", "begin"),
        ("close", "end"),
    ]
    assert read_jsonl(result.window.journal)[-1]["state"] == "complete"
    status = json.loads(result.window.status.read_text())
    assert status["state"] == "complete"
    assert status["verdict"] == result.decision.verdict, result.decision.cells[0].reasons
    pooled = read_jsonl(result.window.pooled)
    assert [(r["start"], r["repeat"]) for r in pooled] == [(s, r) for s in ("s1", "s2", "s3") for r in (1, 2)]
    streams = read_jsonl(result.window.streams)
    salts = [s["cache_salt"] for s in streams]
    warmup_waves = [json.loads((result.window.path / f"starts/{s}/start.json").read_text())["warmup"] for s in STARTS]
    assert all(w["steady"] and 2 <= w["waves"] <= 4 and len(w["rates_tps"]) == w["waves"] for w in warmup_waves)
    # Per start: the warm-up stream, its uncounted waves of 2 streams, and repeats x families x streams.
    assert len(salts) == len(set(salts)) == sum(1 + 2 * w["waves"] + 2 * 2 * 2 for w in warmup_waves)
    assert len([s for s in streams if s["repeat"] > 0]) == 3 * 2 * 2 * 2
    assert all(s["ok"] and s["completion_tokens"] == s["max_tokens"] for s in streams)
    for name in ("plan.toml", "window.json", "decision.json", "summary.md", "prompts.jsonl", "waves.jsonl"):
        assert (result.window.path / name).is_file(), name


def test_failed_start_stops_its_server_marks_window_and_launches_nothing_after(make_plan: PlanFactory) -> None:
    loaded = load_plan(make_plan())
    events: list[str] = []
    with pytest.raises(ServerExitedError) as exc:
        asyncio.run(run_window(loaded, "controlled", launcher=launcher_recording(events, fail_role="B")))
    assert events == ["launch A", "healthy A", "stop A", "launch B", "exited B", "stop B"]
    window = exc.value.window_path
    assert window is not None
    status = json.loads((window / "status.json").read_text())
    assert status["state"] == "failed"
    assert status["error_type"] == "ServerExitedError"
    assert not (window / "decision.json").exists()
    assert not (window / "summary.md").exists()
    journal = [(e["step"], e["event"]) for e in read_jsonl(window / "journal.jsonl")]
    assert journal[-3:] == [("start s2", "failed"), ("close", "begin"), ("close", "end")]
    assert read_jsonl(window / "journal.jsonl")[-1]["state"] == "ServerExitedError"
    # s1's measurements were saved before s2 failed, and its control start went to the archive.
    assert {r["start"] for r in read_jsonl(window / "pooled.jsonl")} == {"s1"}
    archived = read_jsonl(window.parent / "control-archive.jsonl")
    assert [(r["window_id"], r["start"]) for r in archived] == [(window.name, "s1")]


def test_control_starts_are_archived_and_the_context_is_kept(make_plan: PlanFactory) -> None:
    loaded = load_plan(make_plan(window={"repeats": 2}))
    events: list[str] = []
    result = asyncio.run(run_window(loaded, "controlled", launcher=launcher_recording(events)))
    archive = loaded.path.parent / "windows" / "control-archive.jsonl"
    rows = read_jsonl(archive)
    assert [(r["start"], r["role"], r["cell"]) for r in rows] == [("s1", "A", "short-b1"), ("s3", "A", "short-b1")]
    assert all(r["window_id"] == result.window.window_id and len(r["repeats"]) == 2 for r in rows)
    context = json.loads((result.window.path / "context.json").read_text())
    assert context["format"] == "fairwin.decision-context/1"
    assert context["archive"][0]["starts"] == 0  # the archive was empty before this window
    # A second window sees the first one's control starts, and not its own.
    second = asyncio.run(run_window(loaded, "controlled", launcher=launcher_recording(events)))
    context = json.loads((second.window.path / "context.json").read_text())
    assert context["archive"][0]["starts"] == 2
    assert len(read_jsonl(archive)) == 4


def test_candidate_first_order_launches_the_candidate_twice(make_plan: PlanFactory) -> None:
    loaded = load_plan(make_plan(window={"repeats": 2}))
    events: list[str] = []
    result = asyncio.run(run_window(loaded, "controlled", launcher=launcher_recording(events), order="candidate-first"))
    assert [e for e in events if e.startswith("launch")] == ["launch B", "launch A", "launch B"]
    manifest = json.loads(result.window.manifest.read_text())
    assert manifest["order"] == "candidate-first"
    assert [s["kind"] for s in manifest["starts"]] == ["candidate", "control", "candidate"]
    pooled = read_jsonl(result.window.pooled)
    assert {(r["start"], r["kind"]) for r in pooled} == {("s1", "candidate"), ("s2", "control"), ("s3", "candidate")}
    assert result.decision.order == "candidate-first"
    archived = read_jsonl(loaded.path.parent / "windows" / "control-archive.jsonl")
    assert [(r["start"], r["role"]) for r in archived] == [("s2", "A")]


def test_prompt_ids_shared_by_two_families_stay_apart(make_plan: PlanFactory) -> None:
    plan = make_plan(window={"repeats": 2})
    directory = plan.parent
    # Same ids in both families; prose is cut to the cell's 64 tokens, code is 60 tokens long (within tolerance).
    for family, words in (("prose", ["alpha"] * 400), ("code", ["beta"] * 60)):
        rows = [{"id": f"p-{i}", "text": " ".join(words)} for i in range(6)]
        (directory / f"{family}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        order = {"format": "fairwin.order/1", "family": family, "ids": [f"p-{i}" for i in range(6)]}
        (directory / f"{family}.order.json").write_text(json.dumps(order))
    text = plan.read_text()
    from fairwin.files import sha256_file

    for family in ("prose", "code"):
        for suffix, key in ((".jsonl", "prompts_sha256"), (".order.json", "order_sha256")):
            start = text.index(f'{key} = "', text.index(f'"{family}{suffix}"'))
            old = text[start : text.index('"', start + len(key) + 4) + 1]
            text = text.replace(old, f'{key} = "{sha256_file(directory / (family + suffix))}"')
    plan.write_text(text)
    loaded = load_plan(plan)
    result = asyncio.run(run_window(loaded, "controlled", launcher=launcher_recording([])))
    prepared = read_jsonl(result.window.prompts)
    by_family = {(p["family"], p["id"]): p["text"] for p in prepared}
    assert by_family[("prose", "p-0")].startswith("alpha") and by_family[("code", "p-0")].startswith("beta")
    streams = [s for s in read_jsonl(result.window.streams) if s["repeat"] > 0]
    assert {(s["family"], s["prompt_tokens"]) for s in streams} == {("prose", 64), ("code", 60)}
