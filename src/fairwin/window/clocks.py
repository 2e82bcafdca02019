"""The GPUs watched through the whole hold, not only during waves: a dial-back between starts counts too.

Each start samples its own GPUs while it measures (window/start.py). Beside that, a window
whose production is taken down samples the GPUs of every host it touches from the take-down
to the restore, into ``hold-telemetry.jsonl``, pausing while a start samples its own. A
dial-back in those samples outside every start's own sampling (before the first, between two
while servers stop and start, after the last) is named by the start it came before, goes
into the decision's context and makes the window INCONCLUSIVE: a start that begins on a GPU
still cooling down from a dial-back is not a same-clock control.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from fairwin.directory.journal import JournalRow
from fairwin.files import scan_jsonl
from fairwin.telemetry.sampler import Dialback, Sampler, summarize

#: The hold's own samples, in the window's directory (fairwin.telemetry/1 rows).
HOLD_TELEMETRY = "hold-telemetry.jsonl"
#: The steps the hold spans: from the end of the first to the beginning of the second.
HELD_FROM, HELD_UNTIL = "production down", ("restore", "chain hold")


Span = tuple[str, float, float]  # a start's name, and its first and last GPU sample


def held(journal: Iterable[JournalRow]) -> tuple[float, float] | None:
    """The hold, from the journal: production down's end to the restore's beginning (or the last row's time)."""
    held_from = held_until = None
    last = 0.0
    for row in journal:
        step, event, when = row.step, row.event, row.time
        last = max(last, when)
        if step == HELD_FROM and event == "end":
            held_from = when
        elif step in HELD_UNTIL and event == "begin" and held_until is None:
            held_until = when
    return (held_from, held_until if held_until is not None else last) if held_from is not None else None


def measured_spans(starts_dir: Path) -> list[Span]:
    """Each start's own sampling (its first to its last GPU sample, from starts/sN/telemetry.jsonl), in order."""
    spans = []
    for path in sorted(starts_dir.glob("*/telemetry.jsonl"), key=lambda p: int(p.parent.name[1:])):
        times = [float(row["time"]) for row in scan_jsonl(path)[0] if "time" in row and "error" not in row]
        if times:
            spans.append((path.parent.name, min(times), max(times)))
    return spans


def between_starts(
    dialbacks: Sequence[Dialback], hold: tuple[float, float] | None, spans: Sequence[Span]
) -> dict[str, int]:
    """Dial-backs inside the hold but outside every start's own sampling, counted by the start they came before
    ('before s2'), or 'after sN' past the last."""
    if hold is None:
        return {}
    counted: dict[str, int] = {}
    for event in dialbacks:
        if not hold[0] <= event.time <= hold[1] or any(begin <= event.time <= end for _, begin, end in spans):
            continue
        following = [name for name, begin, _ in spans if begin > event.time]
        gap = f"before {following[0]}" if following else f"after {spans[-1][0]}" if spans else "with no start"
        counted[gap] = counted.get(gap, 0) + 1
    return counted


def hold_dialbacks(
    sampler: Sampler | None, window: Path, journal: Iterable[JournalRow], kinds: Iterable[str]
) -> dict[str, int]:
    """The hold sampler's dial-backs of the invalidating ``kinds`` outside the starts' own sampling (none
    without a sampler)."""
    if sampler is None:
        return {}
    wanted = set(kinds)
    found = [d for d in summarize(sampler, "none").dialbacks if d.kind in wanted]
    return between_starts(found, held(journal), measured_spans(window / "starts"))
