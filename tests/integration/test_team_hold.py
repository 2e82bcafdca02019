"""A team's own hold (`[custody]`): taken before production is touched, released after it is given back, and by
`fairwin recover` when fairwin died holding it (real `fairwin sim` processes, production a sim fairwin launched)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fairwin.files import scan_jsonl
from tests.conftest import PlanFactory
from tests.integration.helpers import fairwin, only_window
from tests.integration.production import killed_inside, production_plan, start_run


def with_custody(plan: Path, hold: list[str], release: list[str] | None = None) -> Path:
    lines = ["", "[custody]", f"hold_command = {json.dumps(hold)}"]
    if release is not None:
        lines.append(f"release_command = {json.dumps(release)}")
    plan.write_text(plan.read_text() + "\n".join(lines) + "\n")
    return plan


def steps(window: Path) -> list[str]:
    return [f"{row['step']}:{row['event']}" for row in scan_jsonl(window / "journal.jsonl")[0]]


def test_a_team_hold_that_refuses_refuses_the_window_before_production_is_touched(
    make_plan: PlanFactory, stop_production: list[Path]
) -> None:
    refusing = ["sh", "-c", "echo checking; echo HOLD busy: legacy window 42 holds gpu0 >&2; exit 3"]
    plan = with_custody(production_plan(make_plan, "team-refuses"), refusing, ["true"])
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    done = fairwin("run", str(plan), "--quiet")
    assert done.returncode == 4, done.stderr
    assert (
        "the team's hold command sh -c 'echo checking; echo HOLD busy: legacy window 42 holds gpu0 >&2; exit 3' "
        "exited 3: checking | HOLD busy: legacy window 42 holds gpu0; production was not touched"
    ) in done.stderr
    window = only_window(plan)
    assert steps(window)[:4] == ["open:begin", "open:end", "team hold:begin", "team hold:failed"]
    assert not any(s.startswith(("production down", "team release")) for s in steps(window))
    assert not (window / "starts").exists() or not any((window / "starts").iterdir())
    assert fairwin("production", "status", str(plan)).returncode == 0  # still UP: never taken down


@pytest.mark.slow
def test_the_team_release_runs_after_the_restore_and_at_recover(
    make_plan: PlanFactory, stop_production: list[Path], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    hold = ["sh", "-c", f'echo "hold $FAIRWIN_WINDOW_ID" >> {ledger}']
    release = ["sh", "-c", f'echo "release $FAIRWIN_WINDOW_ID" >> {ledger}']
    plan = with_custody(production_plan(make_plan, "team-releases"), hold, release)
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    done = fairwin("run", str(plan), "--quiet")
    assert done.returncode == 0, done.stderr
    window = only_window(plan)
    journal = steps(window)
    assert journal.index("team hold:end") < journal.index("production down:begin")
    assert journal.index("restore:end") < journal.index("team release:begin") < journal.index("decide:begin")
    assert ledger.read_text().splitlines() == [f"hold {window.name}", f"release {window.name}"]
    # fairwin killed inside a start: recover gives production back, then releases the team's hold.
    killed = killed_inside(plan, start_run(plan, kill_at="start s1:launched"), "start s1:launched")
    assert ledger.read_text().splitlines()[-1] == f"hold {killed.name}"
    recovered = fairwin("recover", str(plan))
    assert recovered.returncode == 0, recovered.stderr
    assert ledger.read_text().splitlines()[-1] == f"release {killed.name}"
    # Recovery journals its own steps; production's give-back (in the status) came before the release.
    assert steps(killed)[-4:] == ["recover:begin", "team release:begin", "team release:end", "recover:end"]
    status = json.loads((killed / "status.json").read_text())
    assert status["state"] == "interrupted" and status["recovery"]["restore"]["state"] == "RESTORED"
    assert fairwin("production", "status", str(plan)).returncode == 0
    assert fairwin("recover", str(plan)).stdout.startswith("nothing to recover")  # released once, not again
    assert ledger.read_text().count(f"release {killed.name}") == 1


def test_a_release_that_fails_is_recorded_as_owed_and_a_hold_that_cannot_run_refuses(
    make_plan: PlanFactory, tmp_path: Path
) -> None:
    import asyncio

    from fairwin.custody.team_hold import TeamHold, release_owed
    from fairwin.directory.journal import JournalRow
    from fairwin.errors import GateRefused
    from fairwin.plan import load_plan
    from fairwin.plan.site import Site

    failing = 'custody.release_command=["sh", "-c", "echo lease expired >&2; exit 2"]'
    loaded = load_plan(make_plan(), ['custody.hold_command=["true"]', failing])
    team = TeamHold(Site.of(loaded), "w1", tmp_path)
    assert asyncio.run(team.take()).exit == 0 and team.owed
    released = asyncio.run(team.release())
    assert released.released is False and released.exit == 2 and not team.owed  # tried once; recover retries
    assert released.error is not None and released.error.endswith("exited 2: lease expired")
    rows = [
        JournalRow(time=0, step="team hold", event="end"),
        JournalRow.model_validate({"time": 1, "step": "team release", "event": "end", **released.model_dump()}),
    ]
    assert release_owed(rows) and not release_owed(
        [*rows, JournalRow(time=2, step="team release", event="end", released=True)]
    )
    loaded = load_plan(make_plan(name="p2.toml"), ['custody.hold_command=["/opt/nowhere/hold"]'])
    missing = TeamHold(Site.of(loaded), "w2", tmp_path)
    never_ran = r"hold command /opt/nowhere/hold did not run to its end: could not run: .*No such file"
    with pytest.raises(GateRefused, match=never_ran):
        asyncio.run(missing.take())


@pytest.mark.slow
def test_a_failed_team_release_stays_owed_in_the_windows_receipts_until_recover_releases_it(
    make_plan: PlanFactory, stop_production: list[Path], tmp_path: Path
) -> None:
    """The team's release fails at the window's end (its lease server is away): the window completes, and its
    status, summary and page say the release is owed; `fairwin recover` runs it again, fails again (exit 3,
    still owed), and once the lease server is back releases it and says so; a later recover finds nothing."""
    ledger, away = tmp_path / "ledger.txt", tmp_path / "lease-server-away"
    away.touch()
    release = ["sh", "-c", f'if [ -e {away} ]; then echo lease server away >&2; exit 2; fi; echo "release" >> {ledger}']
    plan = with_custody(production_plan(make_plan, "team-owed", window={"report_html": True}), ["true"], release)
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    done = fairwin("run", str(plan), "--quiet")
    assert done.returncode == 0, done.stderr
    window = only_window(plan)
    status = json.loads((window / "status.json").read_text())
    assert status["state"] == "complete"
    assert status["team_release"]["released"] is False and status["team_release"]["attempts"] == 1
    assert status["team_release"]["error"].endswith("exited 2: lease server away")
    assert "team release: NOT RELEASED, owed (" in (window / "summary.md").read_text()
    assert "end: NOT released (owed)" in (window / "report.html").read_text()
    again = fairwin("recover", str(plan))
    assert again.returncode == 3, again.stdout
    assert f"window {window.name}: the team's release command" in again.stderr and "still owed" in again.stderr
    assert json.loads((window / "status.json").read_text())["team_release"]["attempts"] == 2
    away.unlink()
    released = fairwin("recover", str(plan))
    assert released.returncode == 0, released.stderr
    assert released.stdout.strip() == f"team release of window {window.name} released"
    status = json.loads((window / "status.json").read_text())
    assert status["state"] == "complete" and status["verdict"] and status["team_release"]["released"] is True
    assert status["team_release"]["attempts"] == 3 and ledger.read_text() == "release\n"
    assert fairwin("recover", str(plan)).stdout.startswith("nothing to recover")


@pytest.mark.slow
def test_a_team_hold_is_held_across_a_chain_and_released_once_at_its_end_or_its_abort(
    make_plan: PlanFactory, stop_production: list[Path], scratch_chain_marker: Path, tmp_path: Path
) -> None:
    """The runbook keeps one HOLD across its chained windows: the first window takes it, the next carries it on
    without running the hold command again, and the restore that ends the chain is followed by one release; a
    chain aborted outside its windows (`fairwin chain abort`) releases it too, into the window that took it."""
    import sys

    ledger = tmp_path / "ledger.txt"
    hold = ["sh", "-c", f'echo "hold $FAIRWIN_WINDOW_ID" >> {ledger}']
    release = ["sh", "-c", f'echo "release $FAIRWIN_WINDOW_ID" >> {ledger}']
    holder = {"argv": [sys.executable, "-c", "import time; time.sleep(3600)", "hold-team-chain"], "settle_s": 0.2}
    plan = production_plan(make_plan, "team-chain", window={"rule": "win2-v1"}, chain={"placeholders": {"gpu": holder}})
    plan = with_custody(plan, hold, release)
    stop_production.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    first = fairwin("run", str(plan), "--quiet", "--chain")
    assert first.returncode == 0, first.stderr
    w1 = only_window(plan)
    assert ledger.read_text().splitlines() == [f"hold {w1.name}"]  # taken, and held over: no release
    assert json.loads(scratch_chain_marker.read_text())["team_hold"]["window_id"] == w1.name
    last = fairwin("run", str(plan), "--quiet", "--chain-last")
    assert last.returncode == 0, last.stderr
    w2 = next(p for p in (plan.parent / "windows").iterdir() if p.is_dir() and p.name not in (w1.name, ".production"))
    assert ledger.read_text().splitlines() == [f"hold {w1.name}", f"release {w2.name}"]
    carried = next(e for e in scan_jsonl(w2 / "journal.jsonl")[0] if e["step"] == "team hold" and e["event"] == "end")
    assert carried["held_by_chain_since"] == w1.name and carried["argv"] == []
    assert json.loads((w2 / "status.json").read_text())["team_release"]["released"] is True
    # A new chain, aborted by hand after its first window: the chain's hold is released once, after the restore.
    assert fairwin("run", str(plan), "--quiet", "--chain").returncode == 0
    w3 = max(
        (p for p in (plan.parent / "windows").iterdir() if p.is_dir() and p.name.startswith("2")), key=lambda p: p.name
    )
    aborted = fairwin("chain", "abort", str(plan))
    assert aborted.returncode == 0, aborted.stderr
    assert ledger.read_text().splitlines()[-2:] == [f"hold {w3.name}", f"release {w3.name}"]
    assert json.loads((w3 / "status.json").read_text())["team_release"]["released"] is True
    end = [json.loads(line) for line in (plan.parent / "windows" / "chains.jsonl").read_text().splitlines()][-1]
    assert end["end"] == "ABORTED" and end["team_release"]["released"] is True
