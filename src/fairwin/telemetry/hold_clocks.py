"""The GPUs watched through the whole hold, not only during waves: a dial-back between starts counts too.

Each start samples its own GPUs while it measures (window/start.py). Beside that, a window
whose production is taken down samples the GPUs of every host it touches from the take-down
to the restore, into ``hold-telemetry.jsonl``, pausing while a start samples its own, and
once more as each start's servers stop (window/start.py), so no gap goes unsampled. A
dial-back in those samples outside every start's own sampling (before the first, between two
while servers stop and start, after the last) is named by the start it came before, goes
into the decision's context and makes the window INCONCLUSIVE: a start that begins on a GPU
still cooling down from a dial-back is not a same-clock control. So does a **re-lock**: a
watchdog that locks the clock lower while servers stop and start, and back before the next start
measures, leaves every start at one cap yet hands the next start a GPU that was just run
elsewhere; each gap's clocks are named with the caps of the starts around it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fairwin.directory.journal import JournalRow
from fairwin.directory.layout import WindowDir
from fairwin.directory.start_receipt import StartReceipt
from fairwin.directory.window_records import WindowRecords
from fairwin.files import scan_jsonl
from fairwin.plan.telemetry import TelemetrySettings
from fairwin.telemetry.gpu import DIALBACK, HERE, LOCKED, GpuSample, GpuSource
from fairwin.telemetry.sampler import Sampler, dialbacks, gpu_key

#: The hold's own samples, in the window's directory (fairwin.telemetry/1 rows).
HOLD_TELEMETRY = "hold-telemetry.jsonl"
#: The steps the hold spans: from the end of the first to the beginning of the second. A window without
#: production holds its hardware from its open to its decision: its gaps between starts are watched the same.
HELD_FROM, HELD_UNTIL = ("production down", "open"), ("restore", "chain hold", "decide")


Span = tuple[str, float, float]  # a start's name, and its first and last GPU sample


@dataclass(frozen=True)
class ClockWatch:
    """What watches the clocks, fixed at admission: the hosts whose cap or dial-backs nothing observes (a
    CPU-only plan's, or accepted by the plan), each watchdog log's size, and the GPU source here."""

    unwatched: tuple[str, ...] = ()
    watchdog_marks: Mapping[str, int] = field(default_factory=dict)
    here: GpuSource | None = None  # the GPU source on fairwin's own host, found once at admission
    gpus_unread: tuple[str, ...] = ()  # hosts whose GPUs nothing reads (a CPU plan's, or accepted by the plan)


@dataclass(frozen=True)
class HoldClocks:
    """What the window saw of the clocks outside its starts' own sampling, for its decision's context."""

    dialbacks: dict[str, int] = field(default_factory=dict)  # by gap ('before s2')
    relocks: dict[str, list[str]] = field(default_factory=dict)  # by gap, each GPU's clocks in order
    watchdog: dict[str, list[str]] = field(default_factory=dict)  # by host, the lines its watchdog added


def held(journal: Iterable[JournalRow]) -> tuple[float, float] | None:
    """The hold, from the journal: production down's end (the open's, without production) to the restore's
    beginning (the decision's, without production; or the last row's time)."""
    ends: dict[str, float] = {}
    begins: dict[str, float] = {}
    last = 0.0
    for row in journal:
        last = max(last, row.time)
        if row.event == "end" and row.step in HELD_FROM:
            ends[row.step] = row.time
        elif row.event == "begin" and row.step in HELD_UNTIL:
            begins.setdefault(row.step, row.time)
    held_from = next((ends[step] for step in HELD_FROM if step in ends), None)
    held_until = min(begins.values(), default=last)
    return (held_from, held_until) if held_from is not None else None


def measured_spans(starts_dir: Path) -> list[Span]:
    """Each start's own sampling (its first to its last GPU sample, from starts/sN/telemetry.jsonl), in order."""
    spans = []
    for path in sorted(starts_dir.glob("*/telemetry.jsonl"), key=lambda p: int(p.parent.name[1:])):
        times = [float(row["time"]) for row in scan_jsonl(path)[0] if "time" in row and "error" not in row]
        if times:
            spans.append((path.parent.name, min(times), max(times)))
    return spans


def gap_of(when: float, hold: tuple[float, float] | None, spans: Sequence[Span]) -> str | None:
    """The gap of the hold ``when`` fell in, by the start it came before ('before s2', or 'after sN' past the
    last); None outside the hold or inside a start's own sampling."""
    if hold is None or not hold[0] <= when <= hold[1] or any(begin <= when <= end for _, begin, end in spans):
        return None
    following = [name for name, begin, _ in spans if begin > when]
    return f"before {following[0]}" if following else f"after {spans[-1][0]}" if spans else "with no start"


def between_starts(
    samples: Sequence[GpuSample], hold: tuple[float, float] | None, spans: Sequence[Span], kinds: Iterable[str]
) -> dict[str, int]:
    """Dial-backs of ``kinds`` inside the hold but outside every start's own sampling, counted gap by gap: each
    gap is judged on its own samples, so a GPU still slowed when the next gap begins counts there again (the
    start between them sampled it itself)."""
    by_gap: dict[str, list[GpuSample]] = {}
    for sample in samples:
        if (gap := gap_of(sample.time, hold, spans)) is not None:
            by_gap.setdefault(gap, []).append(sample)
    wanted = set(kinds)
    counted = {gap: len([d for d in dialbacks(found) if d.kind in wanted]) for gap, found in by_gap.items()}
    return {gap: n for gap, n in counted.items() if n}


def _held_clock(sample: GpuSample, cap_from: str) -> float | None:
    """What a sample says the GPU is held at, busy or idle (a locked clock holds while idle): the SM clock under a
    lock and no dial-back (caps read as locked clocks, or from the servers' logs: a watchdog re-locks the GPUs
    themselves, which only they show between starts), or the applications clock."""
    if cap_from == "applications":
        return sample.applications_mhz
    reasons = sample.reasons or 0
    return sample.sm_mhz if reasons & LOCKED and not reasons & DIALBACK else None


def relocks(
    samples: Sequence[GpuSample],
    hold: tuple[float, float] | None,
    spans: Sequence[Span],
    caps: Mapping[str, Mapping[str, float | None]],
    cap_from: str,
) -> dict[str, list[str]]:
    """Each gap whose held clock differs from the caps of the starts around it, or moves inside it, with each
    such GPU's clocks in order ('GPU-0 1980 -> 1755 -> 1980 MHz'); ``caps``: each start's cap by GPU. With caps
    from the servers' logs the GPUs' own samples still show a re-lock in a gap, held to each host's logged cap."""
    if cap_from == "none":
        return {}
    by_gap: dict[tuple[str, str], list[float]] = {}
    for sample in sorted(samples, key=lambda s: s.time):
        gap = gap_of(sample.time, hold, spans)
        if gap is not None and (clock := _held_clock(sample, cap_from)) is not None:
            by_gap.setdefault((gap, gpu_key(sample)), []).append(clock)
    names = [name for name, _, _ in spans]
    found: dict[str, list[str]] = {}
    for (gap, gpu), clocks in by_gap.items():
        before, after = _around(gap, names)
        around = [_cap_of(caps.get(before or ""), gpu), *clocks, _cap_of(caps.get(after or ""), gpu)]
        shown = [c for i, c in enumerate(around) if c is not None and (i == 0 or c != around[i - 1])]
        if len(set(shown)) > 1:
            found.setdefault(gap, []).append(f"{gpu} {' -> '.join(f'{c:g}' for c in shown)} MHz")
    return found


def _around(gap: str, names: Sequence[str]) -> tuple[str | None, str | None]:
    """The starts on either side of a gap named by :func:`gap_of` ('before s2': s1 and s2; 'after s3': s3)."""
    if gap.startswith("after "):
        return gap.removeprefix("after "), None
    after = gap.removeprefix("before ")
    if after not in names:  # 'with no start'
        return None, None
    index = names.index(after)
    return (names[index - 1] if index else None), after


def _cap_of(caps: Mapping[str, float | None] | None, gpu: str) -> float | None:
    """A start's cap on ``gpu``: by its key, else by its UUID alone (a one-host start names no host)."""
    if not caps:
        return None
    return caps.get(gpu, caps.get(gpu.rsplit("/", 1)[-1]))


def start_caps(receipts: Iterable[StartReceipt]) -> dict[str, dict[str, float | None]]:
    """Each start's cap by GPU, from its receipt (none where it sampled nothing); with caps from the logs, each
    GPU's is its host's logged cap."""
    found: dict[str, dict[str, float | None]] = {}
    for receipt in receipts:
        telemetry = receipt.telemetry
        if telemetry is None:
            found[receipt.start] = {}
        elif telemetry.cap_from == "log":
            head = receipt.host or HERE
            found[receipt.start] = {
                gpu: telemetry.cap_by_host.get(gpu.split("/", 1)[0] if "/" in gpu else head) for gpu in telemetry.gpus
            }
        else:
            found[receipt.start] = telemetry.cap_by_gpu
    return found


def between_starts_clocks(
    sampler: Sampler | None, window: WindowDir, records: WindowRecords, telemetry: TelemetrySettings
) -> tuple[dict[str, int], dict[str, list[str]]]:
    """The hold sampler's invalidating dial-backs and changes of cap outside the starts' own sampling, by gap
    (none without a sampler): the hold and the starts' spans read once for both; the journal and the start
    receipts are the decide step's own reading (``records``)."""
    if sampler is None:
        return {}, {}
    hold, spans = held(records.journal), measured_spans(window.path / "starts")
    caps = start_caps(records.receipts)
    return (
        between_starts(sampler.samples, hold, spans, telemetry.invalidating_dialbacks),
        relocks(sampler.samples, hold, spans, caps, telemetry.cap_from),
    )
