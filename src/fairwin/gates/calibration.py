"""What earlier windows measured: the costs a budget is calibrated from, and each window's budget record.

Costs come from the complete windows of an output directory: each role's start and stop
(by argv), each cell's wave (by shape) and, per production declaration, its take-down and
its restore with the watch (from ``budget.json``'s step times). A damaged window calibrates
nothing and is named; ``history`` reads every finished window's ``budget.json``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fairwin.directory.gate_summary import BudgetRecord
from fairwin.directory.layout import WindowDir
from fairwin.directory.manifest import WindowManifest
from fairwin.directory.start_receipt import StartReceipt, WaveRow
from fairwin.directory.status import WindowStatus
from fairwin.errors import CorruptRecordError, InputError, PlanError
from fairwin.plan.loading import parse_window_plan
from fairwin.plan.models import Cell
from fairwin.plan.roles import Role
from fairwin.records import read_record, read_records


def cell_key(cell: Cell) -> str:
    return json.dumps(
        [cell.endpoint, cell.prompt_tokens, cell.max_tokens, cell.streams_per_wave, cell.concurrency], sort_keys=True
    )


def role_key(role: Role) -> str:
    return json.dumps(role.argv)


@dataclass
class Calibration:
    """Measured costs from earlier complete windows: per role (by argv) and per cell (by shape)."""

    startup_s: dict[str, list[float]] = field(default_factory=dict)
    stop_s: dict[str, list[float]] = field(default_factory=dict)
    wave_s: dict[str, list[float]] = field(default_factory=dict)
    # Per production declaration (its snapshot's sha256): taking it down, and restoring it with the watch.
    takedown_s: dict[str, list[float]] = field(default_factory=dict)
    restore_s: dict[str, list[float]] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)  # "window: why", for windows left out


def calibrate(output_dir: Path) -> Calibration:
    """Costs measured by the complete windows in ``output_dir``; a damaged one is left out, and named."""
    found = Calibration()
    if not output_dir.is_dir():
        return found
    for window in sorted((WindowDir.at(p) for p in output_dir.iterdir()), key=lambda w: w.path):
        if not window.status.exists():
            continue
        try:
            _calibrate_from(window, found)
        except (OSError, ValueError, KeyError, TypeError, PlanError, InputError) as exc:
            # Not this gate's to judge: the window calibrates nothing, and the estimate says so.
            found.unreadable.append(f"{window.window_id}: {exc}")
    return found


@contextlib.contextmanager
def _fields_of(path: Path) -> Iterator[None]:
    """A field calibration needs, missing or of the wrong type (or naming a role or cell the plan lacks)."""
    try:
        yield
    except KeyError as exc:
        raise CorruptRecordError(f"{path}: no {exc.args[0]!r} where calibration reads it") from None
    except (TypeError, ValueError) as exc:
        raise CorruptRecordError(f"{path}: {exc}") from None


def _calibrate_from(files: WindowDir, found: Calibration) -> None:
    status = read_record(files.status, WindowStatus)
    if status.state != "complete":
        return
    plan = parse_window_plan(files)
    startup, stop, waves = [], [], []
    for start_file in files.start_receipt_paths():
        with _fields_of(start_file):
            start = read_record(start_file, StartReceipt)
            key = role_key(plan.roles[start.role])
            if start.healthy_after_s is None or start.stop is None:
                raise KeyError("healthy_after_s" if start.healthy_after_s is None else "stop")
            startup.append((key, start.healthy_after_s))
            stop.append((key, start.stop.seconds))
    with _fields_of(files.waves):
        for wave in read_records(files.waves, WaveRow):
            waves.append((cell_key(plan.cells[wave.cell]), wave.seconds))
    for what, found_in, name in ((startup, "starts", "starts/*/start.json"), (waves, "waves", "waves.jsonl")):
        if not what:
            raise CorruptRecordError(f"{files.path / name}: no {found_in}, though the window is complete")
    takedown, restore = _production_costs(files)
    # Only a window read whole counts: nothing is added from one that fails halfway.
    for table, pairs in (
        (found.startup_s, startup),
        (found.stop_s, stop),
        (found.wave_s, waves),
        (found.takedown_s, takedown),
        (found.restore_s, restore),
    ):
        for key, seconds in pairs:
            table.setdefault(key, []).append(seconds)


def _production_costs(files: WindowDir) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """(production's sha256, seconds) of the take-down and of the restore with its watch, from the journal's
    step times in budget.json; nothing for a window without production or from before budget.json."""
    production = read_record(files.manifest, WindowManifest).production
    if not production or not files.budget.exists():
        return [], []
    actual = read_record(files.budget, BudgetRecord).actual_s
    if not {"open", "production down", "quiet after", "restore"} <= actual.keys():
        return [], []  # a restore that failed measured nothing a later window may plan on
    with _fields_of(files.manifest):
        key = production.sha256
    return ([(key, actual["production down"] - actual["open"])], [(key, actual["restore"] - actual["quiet after"])])


def history(directory: Path) -> list[tuple[str, BudgetRecord]]:
    """Every finished window's budget record under ``directory``, oldest first; a damaged one is refused."""
    if not directory.is_dir():
        raise InputError(f"{directory}: no such directory of windows")
    found = []
    for path in sorted(directory.glob("*/budget.json")):
        record = read_record(path, BudgetRecord)
        if not record.starts_ended:
            raise CorruptRecordError(f"{path}: actual_s names no finished start")
        found.append((path.parent.name, record))
    if not found:
        raise InputError(f"{directory}: no finished window has a budget.json yet")
    return found
