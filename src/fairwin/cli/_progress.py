"""How a running window is shown: a live display on a terminal, plain lines otherwise, JSON lines for machines.

On a terminal (stderr), one bar follows the window's waves with the step, start and
cell it is at, the time spent against the budget's estimate and an ETA from the pace
so far; the window's own lines print above it. Not on a terminal (CI logs, a pipe),
the same lines print plainly. ``--progress-json`` writes every ``fairwin.progress/1``
event to stdout, one JSON object per line, flushed as it happens.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # every command builds the parser: what only a running window needs is imported there
    from rich.console import Console
    from rich.progress import TaskID

    from fairwin.window.progress import Listener

Say = Callable[[str], None]


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


class LiveDisplay:
    """One bar over every wave of the window, its text kept up to date from the progress events."""

    def __init__(self, console: Console) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[times]}"),
            console=console,
        )
        self.task: TaskID = self.progress.add_task("opening the window", total=None, times="")
        self.started = time.monotonic()
        self.estimate_s: float | None = None
        self.first_look_s: float | None = None
        self.looks: list[int] = []
        self.starts = 0
        self.waves_per_start = 0
        self.where = ""

    def say(self, line: str) -> None:
        self.progress.console.print(line, markup=False, highlight=False)

    def listen(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "open":
            self.estimate_s = event.get("estimate_s")
            self.first_look_s = event.get("first_look_estimate_s")
            self.looks = [int(n) for n in event.get("looks") or []]
            self.starts, self.waves_per_start = len(event.get("starts", [])), int(event.get("waves_per_start", 0))
            # A sequential window may stop at its first look: the bar runs to there, and grows at each look it
            # goes on from, so its total and ETA never count starts the window may not run.
            self.progress.update(self.task, total=self._waves_to(self._next_look(0)) or None)
        elif kind == "step" and event.get("state") == "begin":
            self.where = str(event["step"])
        elif kind == "wave":
            self.where = f"{event['start']} ({event['kind']}, {event['role']}) {event['wave']}"
            self.progress.advance(self.task)
        elif kind == "look":
            self.where = f"look after s{event['after']}: {event['verdict']}"
            if event.get("stop"):  # a sequential window that stopped early: the bar ends where it did
                self.progress.update(self.task, total=self.progress.tasks[0].completed)
            else:
                self.progress.update(self.task, total=self._waves_to(self._next_look(int(event["after"]))))
        elif kind == "close":
            self.where = f"{event['state']}" + (f": {event['verdict']}" if event.get("verdict") else "")
        self.progress.update(self.task, description=self.where, times=self._times())

    def _next_look(self, after: int) -> int:
        """The starts the window runs at least: to its next look after ``after``, else all of them."""
        return next((n for n in self.looks if n > after), self.starts)

    def _waves_to(self, starts: int) -> int:
        return starts * self.waves_per_start

    def _times(self) -> str:
        elapsed = time.monotonic() - self.started
        task = self.progress.tasks[0]
        if self.first_look_s and self.estimate_s and self.looks:
            estimated = f" of ~{_minutes(self.first_look_s)} to the first look (at most ~{_minutes(self.estimate_s)})"
        else:
            estimated = f" of ~{_minutes(self.estimate_s)} estimated" if self.estimate_s else ""
        text = _minutes(elapsed) + estimated
        if task.total and task.completed:
            text += f", ETA {_minutes(elapsed / task.completed * (task.total - task.completed))}"
        return text


def _json_line(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event, sort_keys=True) + "\n")
    sys.stdout.flush()


@contextlib.contextmanager
def window_display(console: Console, *, quiet: bool, as_json: bool) -> Iterator[tuple[Say, Listener | None]]:
    """(say, listener) for ``run_window``: what the window's lines and progress events go to."""
    from fairwin.telemetry.host_condition import HOST_FINDING

    def plain(line: str) -> None:
        # --quiet hides the progress, never a finding about the host the window measured on.
        if not quiet or line.lstrip().startswith(f"warning: {HOST_FINDING}"):
            console.print(line, markup=False)

    if as_json:
        yield plain, _json_line
    elif quiet or not console.is_terminal:
        yield plain, None
    else:
        shown = LiveDisplay(console)
        with shown.progress:
            yield shown.say, shown.listen
