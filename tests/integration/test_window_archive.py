"""A window and its archive: one snapshot read at open, its rows keyed exactly, an append that fails loses nothing."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path

import pytest

from fairwin.archive import ArchivedRepeat, ArchiveRow, open_archive
from fairwin.archive.window_rows import planned_match
from fairwin.plan import load_plan
from fairwin.plan.site import Site
from fairwin.window.run import open_window, run_window
from tests.conftest import PlanFactory
from tests.unit.test_window_steps import launcher_recording


def keyed_like(plan: Path, window: str, role: str = "A", **change: object) -> ArchiveRow:
    """A control start keyed as this plan's controlled windows key theirs (no GPU here: no model, no caps)."""
    key = planned_match(Site.of(load_plan(plan)), "controlled", "A", "short-b1")
    fields = {
        "window_id": window,
        "time": 1.0,
        "commit": None,
        "mode": "controlled",
        "role": role,
        "start": "s1",
        "cell": "short-b1",
        "max_tokens": key.max_tokens,
        "clock_cap_mhz": None,
        "production_commit": key.production_commit,
        "prompt_tokens": key.prompt_tokens,
        "concurrency": key.concurrency,
        "temperature": key.temperature,
        "hosts": list(key.hosts or ()),
        "gpu_model": None,
        "gpu_count": None,
        "clock_caps_mhz": {},
        "repeats": [ArchivedRepeat(repeat=r, pooled_rate_tps=100.0 + r) for r in (1, 2)],
    }
    return ArchiveRow.model_validate({**fields, **change})


def test_the_decision_reads_the_snapshot_taken_at_open_and_the_next_window_reads_its_rows(
    make_plan: PlanFactory,
) -> None:
    plan = make_plan(window={"repeats": 2})
    archive = open_archive(plan.parent / "windows" / "control-archive.jsonl")
    archive.append([keyed_like(plan, "old")])
    loaded = load_plan(plan)
    window = asyncio.run(open_window(loaded, "controlled", launcher=launcher_recording([])))
    # Appended after open: another coordinator's window, keyed like this one, and one of another role.
    archive.append([keyed_like(plan, "meanwhile"), keyed_like(plan, "other", role="P")])
    result = asyncio.run(window.run())
    context = json.loads((result.window.path / "context.json").read_text())
    assert context["archive_snapshot"]["rows"] == 1  # the snapshot of open: "old" only
    rate = next(n for n in context["archive"] if n["metric"] == "pooled_rate_tps")
    assert (rate["starts"], rate["windows"]) == (1, 1)
    manifest = json.loads((result.window.path / "window.json").read_text())
    assert manifest["archive_snapshot"] == context["archive_snapshot"]
    assert manifest["archive_key"]["hosts"]["here"] == socket.gethostname()
    # The next window sees old, meanwhile and the first window's own control starts, keyed exactly as its own.
    second = asyncio.run(run_window(loaded, "controlled", launcher=launcher_recording([])))
    context = json.loads((second.window.path / "context.json").read_text())
    controls = sum(1 for s in manifest["starts"] if s["kind"] == "control")
    rate = next(n for n in context["archive"] if n["metric"] == "pooled_rate_tps")
    assert context["archive_snapshot"]["rows"] == 3 + controls
    assert (rate["starts"], rate["windows"]) == (2 + controls, 3)  # P's row is another noise


def test_an_archive_that_cannot_be_written_fails_nothing_and_append_retries_it(
    make_plan: PlanFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.integration.helpers import fairwin

    plan = make_plan(window={"repeats": 2})
    blocked = plan.parent / "blocked"
    monkeypatch.setenv("FAIRWIN_ARCHIVE_URL", str(blocked / "archive.jsonl"))
    loaded = load_plan(plan)
    window = asyncio.run(open_window(loaded, "controlled", launcher=launcher_recording([])))
    blocked.write_text("a file where the archive's directory should be\n")
    result = asyncio.run(window.run())
    status = json.loads((result.window.path / "status.json").read_text())
    assert status["state"] == "complete" and status["archive"]["appended"] is False
    assert f"`fairwin archive append {result.window.path}`" in status["archive"]["problem"]
    blocked.unlink()
    done = fairwin("archive", "append", str(result.window.path))
    assert done.returncode == 0 and "appended 2 control rows" in done.stdout, done.stderr
    again = fairwin("archive", "append", str(result.window.path))
    assert "appended 0 control rows" in again.stdout and "2 were there already" in again.stdout


@pytest.mark.slow
def test_a_window_decides_the_same_from_postgresql_and_from_the_same_rows_in_a_file(
    make_plan: PlanFactory, postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.integration.helpers import fairwin, only_window

    monkeypatch.setenv("FAIRWIN_ARCHIVE_URL", postgres_url)  # a password belongs in the environment, not the plan
    assert fairwin("archive", "migrate").returncode == 0
    plan = make_plan(window={"repeats": 2})
    first = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert first.returncode == 0, first.stderr
    window = only_window(plan)
    password = postgres_url.split(":")[2].split("@")[0]
    for path in window.rglob("*"):  # the URL is recorded, its password never
        assert not path.is_file() or password.encode() not in path.read_bytes(), path
    assert json.loads((window / "window.json").read_text())["archive"] == postgres_url.replace(password, "***")
    exported = tmp_path / "same-rows.jsonl"
    assert fairwin("archive", "export", "--to", str(exported), "--archive", postgres_url).returncode == 0
    assert len(exported.read_text().splitlines()) == 2  # the window's two control starts
    from_database = fairwin("decide", str(window), "--archive", postgres_url, "--json")
    from_file = fairwin("decide", str(window), "--archive", str(exported), "--json")
    assert from_database.returncode == from_file.returncode == 0, from_database.stderr + from_file.stderr
    assert json.loads(from_database.stdout) == json.loads(from_file.stdout)
    (decided,) = json.loads(from_file.stdout)["decisions"]
    assert decided["cells"][0]["noise"]["archive"]["starts"] == 2


def test_a_postgresql_archive_without_the_schema_is_refused_with_the_gates(
    make_plan: PlanFactory, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.integration.helpers import fairwin

    plan = make_plan()
    monkeypatch.setenv("FAIRWIN_ARCHIVE_URL", postgres_url)  # a database fairwin never migrated
    done = fairwin("run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 4 and done.stderr.count("\n") == 1, done.stderr
    assert "has no fairwin schema, this fairwin needs v2; run `fairwin archive migrate" in done.stderr
    assert not (plan.parent / "windows").exists()  # no directory made, no server started


@pytest.mark.slow
def test_two_coordinators_sharing_a_postgresql_archive_never_hold_the_hardware_at_once(
    make_plan: PlanFactory, postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two plans for the same machine, each with its own output directory and so its own lock file (as two
    # coordinator machines have), and one archive: only the archive's lock can keep them apart.
    import psycopg

    from tests.integration.helpers import fairwin
    from tests.integration.production import start_run, wait_for_step

    monkeypatch.setenv("FAIRWIN_ARCHIVE_URL", postgres_url)
    assert fairwin("archive", "migrate").returncode == 0
    first = make_plan(window={"repeats": 2}, name="first.toml")
    second = make_plan(window={"repeats": 2, "output_dir": "elsewhere"}, name="second.toml")
    running = start_run(first, "--mode", "controlled", "--coordinator", "alice")
    window = wait_for_step(first, "start s1", running)
    monkeypatch.setenv("FAIRWIN_LOCK_DIR", str(tmp_path / "bobs-machine"))  # bob coordinates from another machine
    refused = fairwin("run", str(second), "--mode", "controlled", "--quiet", "--coordinator", "bob")
    assert refused.returncode == 4 and refused.stderr.count("\n") == 1, refused.stderr
    assert (
        f"the hardware is held by window {window.name} (pid {running.pid} on {socket.gethostname()}, "
        "coordinator alice" in refused.stderr
    )
    assert "in the shared archive's locks (postgresql://" in refused.stderr
    assert not (tmp_path / "elsewhere").exists()  # refused with the gates: nothing made
    assert running.wait(120) == 0, running.communicate()
    for name in ("window.json", "status.json"):
        recorded = json.loads((window / name).read_text())["coordinator"]
        assert recorded == {"name": "alice", "host": socket.gethostname(), "pid": running.pid}
    with psycopg.connect(postgres_url) as connection:  # given back at the close
        assert connection.execute("SELECT count(*) FROM fairwin_hardware_locks").fetchone() == (0,)
    done = fairwin("run", str(second), "--mode", "controlled", "--quiet", "--coordinator", "bob")
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_recover_gives_back_the_shared_lock_of_a_window_whose_fairwin_died(
    make_plan: PlanFactory, postgres_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import psycopg

    from tests.integration.helpers import fairwin
    from tests.integration.production import killed_inside, start_run

    monkeypatch.setenv("FAIRWIN_ARCHIVE_URL", postgres_url)
    assert fairwin("archive", "migrate").returncode == 0
    first = make_plan(window={"repeats": 2}, name="first.toml")
    second = make_plan(window={"repeats": 2, "output_dir": "elsewhere"}, name="second.toml")
    window = killed_inside(
        first, start_run(first, "--mode", "controlled", kill_at="start s1:launched"), "start s1:launched"
    )
    here = os.environ["FAIRWIN_LOCK_DIR"]
    monkeypatch.setenv("FAIRWIN_LOCK_DIR", str(tmp_path / "another-machine"))  # only the archive's lock is shared
    held = fairwin("run", str(second), "--mode", "controlled", "--quiet")
    assert held.returncode == 4 and f"held by window {window.name}" in held.stderr, held.stderr
    assert "which died without finishing, in the shared archive's locks (postgresql://" in held.stderr
    monkeypatch.setenv("FAIRWIN_LOCK_DIR", here)  # recover runs where the window ran
    assert fairwin("recover", str(first)).returncode == 0
    with psycopg.connect(postgres_url) as connection:
        assert connection.execute("SELECT count(*) FROM fairwin_hardware_locks").fetchone() == (0,)
    assert fairwin("plan", "check", str(second)).returncode == 0
    done = fairwin("run", str(second), "--mode", "controlled", "--quiet")
    assert done.returncode == 0, done.stderr
