"""The window's time budget: an estimate that must fit before anything starts, and how good it was.

Each start costs a server start, one warm-up stream, every cell's waves and a stop.
Costs come from earlier windows of the same roles and cells when there are any
(*measured*: the median over the windows found) and from the plan's ``[budget]``
otherwise (*assumed*); the table says which is which. The window then needs its
close (``restore_s``) and a reserve for restarting a pair of servers; the dry bound
uses the reserve's upper bound. A window is refused when its dry bound exceeds
``limit_min`` or its measurement end exceeds ``measurement_limit_min``.
"""

from __future__ import annotations

import contextlib
import json
import math
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from fairwin.decision.rules import get_rule
from fairwin.durable import read_json, read_jsonl, read_model
from fairwin.errors import CorruptRecordError, GateRefused, InputError, PlanError
from fairwin.plan.loading import LoadedPlan, parse_plan
from fairwin.plan.models import Cell, Mode
from fairwin.plan.roles import Role
from fairwin.plan.schedule import starts_for
from fairwin.production.control import snapshot
from fairwin.vocabulary import BUDGET, START, STATUS, WAVE, WINDOW, WindowStatus


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
    for window in sorted(p for p in output_dir.iterdir() if (p / "status.json").exists()):
        try:
            _calibrate_from(window, found)
        except (OSError, ValueError, KeyError, TypeError, PlanError, InputError) as exc:
            # Not this gate's to judge: the window calibrates nothing, and the estimate says so.
            found.unreadable.append(f"{window.name}: {exc}")
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


def _calibrate_from(window: Path, found: Calibration) -> None:
    status = read_model(window / "status.json", WindowStatus, STATUS.readable)
    if status.state != "complete":
        return
    _, plan = parse_plan(window / "plan.toml")
    startup, stop, waves = [], [], []
    for start_file in sorted((window / "starts").glob("*/start.json")):
        with _fields_of(start_file):
            start = read_json(start_file, START.readable)
            key = role_key(plan.roles[start["role"]])
            startup.append((key, float(start["healthy_after_s"])))
            stop.append((key, float(start["stop"]["seconds"])))
    with _fields_of(window / "waves.jsonl"):
        for wave in read_jsonl(window / "waves.jsonl", WAVE.readable):
            waves.append((cell_key(plan.cells[wave["cell"]]), float(wave["seconds"])))
    for what, found_in, name in ((startup, "starts", "starts/*/start.json"), (waves, "waves", "waves.jsonl")):
        if not what:
            raise CorruptRecordError(f"{window / name}: no {found_in}, though the window is complete")
    takedown, restore = _production_costs(window)
    # Only a window read whole counts: nothing is added from one that fails halfway.
    for table, pairs in ((found.startup_s, startup), (found.stop_s, stop), (found.wave_s, waves),
                         (found.takedown_s, takedown), (found.restore_s, restore)):  # fmt: skip
        for key, seconds in pairs:
            table.setdefault(key, []).append(seconds)


def _production_costs(window: Path) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """(production's sha256, seconds) of the take-down and of the restore with its watch, from the journal's
    step times in budget.json; nothing for a window without production or from before budget.json."""
    with _fields_of(window / "window.json"):
        production = read_json(window / "window.json", WINDOW.readable).get("production")
    if not production or not (window / "budget.json").exists():
        return [], []
    actual = read_model(window / "budget.json", BudgetRecord, BUDGET.readable).actual_s
    if not {"open", "production down", "quiet after", "restore"} <= actual.keys():
        return [], []  # a restore that failed measured nothing a later window may plan on
    with _fields_of(window / "window.json"):
        key = str(production["sha256"])
    return ([(key, actual["production down"] - actual["open"])],
            [(key, actual["restore"] - actual["quiet after"])])  # fmt: skip


@dataclass(frozen=True)
class StartCost:
    start: str
    role: str
    startup_s: float
    warmup_s: float
    waves_s: float
    stop_s: float

    @property
    def total_s(self) -> float:
        return self.startup_s + self.warmup_s + self.waves_s + self.stop_s


@dataclass(frozen=True)
class TimeEstimate:
    mode: str
    starts: list[StartCost]
    restore_s: float
    pair_reserve_s: float
    dry_reserve_s: float
    sources: dict[str, str]
    waves_per_start: int
    takedown_s: float = 0.0  # taking production down, before the first start

    @property
    def measurement_end_s(self) -> float:
        return self.takedown_s + sum(s.total_s for s in self.starts)

    @property
    def reserve_total_s(self) -> float:
        return self.measurement_end_s + self.restore_s + self.pair_reserve_s

    @property
    def dry_bound_s(self) -> float:
        return self.measurement_end_s + self.restore_s + self.dry_reserve_s


def stream_seconds(loaded: LoadedPlan, prompt_tokens: int, max_tokens: int) -> float:
    budget = loaded.plan.budget
    return (prompt_tokens * budget.prefill_ms_per_token + max_tokens * budget.decode_ms_per_token) / 1000.0


def _median(values: list[float] | None) -> float | None:
    return statistics.median(values) if values else None


def estimate(loaded: LoadedPlan, mode_name: str, mode: Mode, calibration: Calibration | None = None) -> TimeEstimate:
    plan, budget = loaded.plan, loaded.plan.budget
    found = calibration or Calibration()
    sources: dict[str, str] = {}
    waves_s = 0.0
    waves = 0
    one_wave: dict[str, float] = {}
    for name, cell in plan.cells.items():
        count = plan.window.repeats * len(cell.families)
        waves += count
        measured = _median(found.wave_s.get(cell_key(cell)))
        if measured is not None:
            one_wave[name] = measured
            sources[f"cell {name}"] = (
                f"measured: median wave {measured:.1f} s over {len(found.wave_s[cell_key(cell)])} waves"
            )
        else:
            batches = math.ceil(cell.streams_per_wave / cell.concurrency)
            one_wave[name] = batches * stream_seconds(loaded, cell.prompt_tokens, cell.max_tokens)
            sources[f"cell {name}"] = "assumed: [budget] ms per token"
        waves_s += count * one_wave[name]
    shortest = min(plan.cells.values(), key=lambda c: c.prompt_tokens)
    # The warm-up stream, then at most warmup_waves_max uncounted waves of the first decision cell.
    warmup = stream_seconds(loaded, shortest.prompt_tokens, plan.window.warmup_max_tokens)
    warmup += plan.window.warmup_waves_max * one_wave[plan.first_decision_cell]
    starts = []
    for start in starts_for(mode, count=get_rule(plan.window.rule).start_count):
        key = role_key(plan.roles[start.role])
        startup, stop = _median(found.startup_s.get(key)), _median(found.stop_s.get(key))
        sources[f"role {start.role} start"] = (
            f"measured: median {startup:.1f} s over {len(found.startup_s[key])} starts" if startup is not None
            else f"assumed: {budget.startup_s:g} s"
        )  # fmt: skip
        starts.append(
            StartCost(start.name, start.role, startup if startup is not None else budget.startup_s, warmup, waves_s,
                      stop if stop is not None else budget.stop_s)
        )  # fmt: skip
    if found.unreadable:
        sources["earlier windows left out"] = (
            f"{len(found.unreadable)} could not be read (first: {found.unreadable[0]})"
        )
    takedown_s, restore_s = _production_estimate(loaded, found, sources)
    return TimeEstimate(mode_name, starts, restore_s, budget.pair_reserve_s, budget.dry_reserve_s, sources, waves,
                        takedown_s)  # fmt: skip


def _production_estimate(loaded: LoadedPlan, found: Calibration, sources: dict[str, str]) -> tuple[float, float]:
    """Seconds to take production down, and to restore and watch it: measured for this declaration, else
    assumed (a server's stop_s; restore_s plus the watch, which always runs its length)."""
    budget, production = loaded.plan.budget, loaded.plan.production
    if production is None:
        return 0.0, budget.restore_s
    key = snapshot(loaded)["sha256"]
    takedown, restore = _median(found.takedown_s.get(key)), _median(found.restore_s.get(key))
    count = len(found.takedown_s.get(key, []))
    sources["production down"] = (f"measured: median {takedown:.1f} s over {count} windows" if takedown is not None
                                  else f"assumed: [budget] stop_s {budget.stop_s:g} s")  # fmt: skip
    sources["restore and watch"] = (
        f"measured: median {restore:.1f} s over {count} windows" if restore is not None
        else f"assumed: [budget] restore_s {budget.restore_s:g} s + watch_s {production.watch_s:g} s"
    )  # fmt: skip
    return (takedown if takedown is not None else budget.stop_s,
            restore if restore is not None else budget.restore_s + production.watch_s)  # fmt: skip


def check_budget(loaded: LoadedPlan, found: TimeEstimate) -> None:
    budget = loaded.plan.budget
    end_min, dry_min = found.measurement_end_s / 60.0, found.dry_bound_s / 60.0
    if end_min > budget.measurement_limit_min:
        raise GateRefused(
            f"budget: the measurement would end at {end_min:.1f} min, past its {budget.measurement_limit_min:g} min "
            "limit; fewer repeats, cells or streams, or a larger limit in [budget]"
        )
    if dry_min > budget.limit_min:
        room = budget.limit_min * 60.0 - found.measurement_end_s - found.restore_s
        raise GateRefused(
            f"budget: the dry bound is {dry_min:.1f} min, over the {budget.limit_min:g} min limit; it fits while the "
            f"pair reserve is at most {max(room, 0.0):.0f} s (dry_reserve_s is {found.dry_reserve_s:g} s)"
        )


def render_table(estimates: list[TimeEstimate], loaded: LoadedPlan) -> list[str]:
    budget = loaded.plan.budget
    lines = [
        f"| mode | {budget.pair_reserve_s:g} s pair reserve | measurement ends "
        f"| {budget.dry_reserve_s:g} s dry bound |",
        "|---|---|---|---|",
    ]
    for found in estimates:
        fits = "" if found.dry_bound_s / 60 <= budget.limit_min else " (refuses)"
        lines.append(
            f"| {found.mode} | {found.reserve_total_s / 60:.1f} min | {found.measurement_end_s / 60:.1f} min | "
            f"{found.dry_bound_s / 60:.1f} min{fits} |"
        )
    return lines


class _Estimated(BaseModel):
    model_config = ConfigDict(extra="allow")

    measurement_end_s: float = Field(gt=0)


class BudgetRecord(BaseModel):
    """A finished window's ``budget.json``: the estimate it was admitted on, and the journal's step times."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["fairwin.budget/1"]
    estimate: _Estimated
    actual_s: dict[str, float]

    @property
    def measured_s(self) -> float:
        """When the last start ended, from the window's open: what ``measurement_end_s`` estimated."""
        return max(seconds for step, seconds in self.actual_s.items() if step.startswith("start "))


def history(directory: Path) -> list[tuple[str, BudgetRecord]]:
    """Every finished window's budget record under ``directory``, oldest first; a damaged one is refused."""
    if not directory.is_dir():
        raise InputError(f"{directory}: no such directory of windows")
    found = []
    for path in sorted(directory.glob("*/budget.json")):
        record = read_model(path, BudgetRecord, BUDGET.readable)
        if not any(step.startswith("start ") for step in record.actual_s):
            raise CorruptRecordError(f"{path}: actual_s names no finished start")
        found.append((path.parent.name, record))
    if not found:
        raise InputError(f"{directory}: no finished window has a budget.json yet")
    return found
