"""A clock watchdog's log as a source of dial-backs: marked at admission, read at the decision, never silent."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from fairwin.errors import GateRefused
from fairwin.plan import load_plan
from fairwin.plan.site import Site
from fairwin.telemetry import watchdog
from fairwin.window.admission import RunOptions, admit
from tests.conftest import PlanFactory


def _plan_with_watchdog(make_plan: PlanFactory, log: Path, pattern: str = "relock") -> Path:
    plan = make_plan()
    plan.write_text(
        plan.read_text() + f'\n[telemetry]\nwatchdog_logs = {{ here = "{log}" }}\nwatchdog_pattern = "{pattern}"\n'
    )
    return plan


def test_only_lines_added_after_the_mark_that_match_are_events(make_plan: PlanFactory, tmp_path: Path) -> None:
    log = tmp_path / "watchdog.log"
    log.write_text("relock 2300 -> 1800 (yesterday)\n")
    loaded = load_plan(_plan_with_watchdog(make_plan, log))
    marks, unread = asyncio.run(watchdog.mark(Site.of(loaded)))
    assert marks == {"here": log.stat().st_size} and unread == []
    assert asyncio.run(watchdog.events(Site.of(loaded), marks)) == {}  # nothing new: a quiet watchdog
    with log.open("a") as out:
        out.write("heartbeat\nrelock 2300 -> 1800\n" + "".join(f"relock {i}\n" for i in range(6)))
    assert asyncio.run(watchdog.events(Site.of(loaded), marks)) == {
        "here": ["relock 2300 -> 1800", "relock 0", "relock 1", "relock 2", "relock 3", "and 2 more"]
    }
    log.write_text("relock after rotation\n")  # shorter than the mark: rotated, read whole
    assert asyncio.run(watchdog.events(Site.of(loaded), marks)) == {"here": ["relock after rotation"]}
    log.unlink()  # gone at the decision: an event, never a quiet log
    (found,) = asyncio.run(watchdog.events(Site.of(loaded), marks))["here"]
    assert found.startswith(f"its log {log} could not be read at the decision")


def test_a_log_that_cannot_be_read_refuses_the_window_naming_it_and_the_check(
    make_plan: PlanFactory, tmp_path: Path
) -> None:
    loaded = load_plan(_plan_with_watchdog(make_plan, tmp_path / "missing.log"))
    marks, (unread,) = asyncio.run(watchdog.mark(Site.of(loaded)))
    assert marks == {}
    assert re.match(r"telemetry.watchdog_logs.here: .*missing.log cannot be read on here", unread)
    admitting = admit(loaded, "controlled", RunOptions(output_dir=tmp_path / "out"))
    with pytest.raises(
        GateRefused, match=r"missing.log cannot be read on here .*\(refused by the watchdog logs check\)$"
    ):
        asyncio.run(admitting)


def test_a_watchdog_on_an_undeclared_host_or_a_bad_pattern_is_a_plan_error(make_plan: PlanFactory) -> None:
    from fairwin.errors import InputError

    plan = make_plan()
    plan.write_text(plan.read_text() + '\n[telemetry]\nwatchdog_logs = { h9 = "/var/log/w.log" }\n')
    with pytest.raises(InputError, match=r"telemetry\.watchdog_logs names host 'h9'"):
        load_plan(plan)
    plan.write_text(make_plan().read_text() + '\n[telemetry]\nwatchdog_pattern = "("\n')
    with pytest.raises(InputError, match="not a regular expression"):
        load_plan(plan)
