"""Progress events and their displays: the feed never fails a window, the live bar follows the waves."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console

from fairwin.cli._progress import LiveDisplay, window_display
from fairwin.directory.gate_summary import BudgetEstimate
from fairwin.plan.schedule import StartSpec
from fairwin.window.progress import ProgressFeed


def test_a_listener_that_fails_is_dropped_once_and_the_window_goes_on() -> None:
    seen: list[dict[str, Any]] = []

    def flaky(event: dict[str, Any]) -> None:
        seen.append(event)
        raise RuntimeError("terminal gone")

    feed = ProgressFeed("w1", flaky)
    feed.emit("step", step="open", state="begin")
    feed.emit("step", step="open", state="end")  # not delivered: the listener was dropped
    assert [e["state"] for e in seen] == ["begin"] and feed.dropped
    assert seen[0]["format"] == "fairwin.progress/1" and seen[0]["window_id"] == "w1"


def test_the_open_event_carries_the_starts_their_estimates_and_the_waves_each_runs() -> None:
    seen: list[dict[str, Any]] = []
    starts = [StartSpec(name="s1", kind="control", role="A"), StartSpec(name="s2", kind="candidate", role="B")]
    ProgressFeed("w1", seen.append).opened(
        Path("/w"),
        "control-first",
        starts,
        BudgetEstimate(
            measurement_end_s=90.0, reserve_total_s=10.0, dry_bound_s=120.0, per_start_s={"s1": 40.0}, sources={}
        ),
        6,
    )
    (event,) = seen
    assert event["estimate_s"] == 90.0 and event["waves_per_start"] == 6 and event["path"] == "/w"
    assert event["starts"] == [
        {"name": "s1", "kind": "control", "role": "A", "estimate_s": 40.0},
        {"name": "s2", "kind": "candidate", "role": "B", "estimate_s": None},
    ]


def test_the_live_bar_counts_waves_and_says_where_the_window_is() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=160)
    shown = LiveDisplay(console)
    shown.listen({"event": "open", "estimate_s": 120.0, "waves_per_start": 2, "starts": [{}, {}, {}]})
    shown.listen({"event": "step", "step": "start s1", "state": "begin"})
    shown.listen({"event": "wave", "start": "s1", "kind": "control", "role": "A", "wave": "c/r1/prose"})
    task = shown.progress.tasks[0]
    assert (task.total, task.completed) == (6, 1)
    assert task.description == "s1 (control, A) c/r1/prose" and "of ~2:00 estimated, ETA" in task.fields["times"]
    shown.listen({"event": "close", "state": "complete", "verdict": "WIN"})
    assert shown.progress.tasks[0].description == "complete: WIN"


def test_a_sequential_windows_bar_runs_to_its_next_look_and_its_estimate_is_the_first_looks() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=160)
    shown = LiveDisplay(console)
    starts: list[dict[str, str]] = [{} for _ in range(9)]
    opening = {"estimate_s": 404.0, "first_look_estimate_s": 75.0, "looks": [5, 7, 9]}
    shown.listen({"event": "open", "waves_per_start": 12, "starts": starts, **opening})
    assert shown.progress.tasks[0].total == 5 * 12  # not the rule's nine starts: it may stop after five
    shown.listen({"event": "wave", "start": "s1", "kind": "control", "role": "A", "wave": "c/r1/prose"})
    assert "of ~1:15 to the first look (at most ~6:44), ETA" in shown.progress.tasks[0].fields["times"]
    shown.listen({"event": "look", "after": 5, "verdict": "CONTINUE"})
    assert shown.progress.tasks[0].total == 7 * 12  # it went on: to the next look
    shown.listen({"event": "look", "after": 7, "verdict": "WIN", "stop": "decided"})
    assert shown.progress.tasks[0].total == 1  # it stopped: the bar ends where it did


def test_without_a_terminal_the_lines_are_plain_and_quiet_means_none() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False)
    with window_display(console, quiet=False, as_json=False) as (say, listener):
        say("s1 [control]: launching")
    assert listener is None and out.getvalue() == "s1 [control]: launching\n"
    with window_display(console, quiet=True, as_json=False) as (say, listener):
        say("not shown")
    assert listener is None and "not shown" not in out.getvalue()
