"""The window as an object with one method per journaled step: open, each start, decide, archive, budget, close.

Each step is journaled as it begins and as it ends or fails, so a reader (or, later,
crash recovery and chained windows) knows exactly how far a window got. Taking
production down and restoring it become steps of their own around the starts, not
branches inside one long function.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypedDict, Unpack

from fairwin.decision import Decision
from fairwin.durable import sha256_file, write_json_atomic
from fairwin.errors import FairwinError, Interrupted, RestoreFailed
from fairwin.gates.sequence import GateInputs, actual_times, run_gates
from fairwin.launch.scheduling import ClientAffinity
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.schedule import StartSpec, starts_for
from fairwin.production.control import Production
from fairwin.vocabulary import BUDGET, WINDOW, PooledRow
from fairwin.window.close import archive_controls, archive_path, decide_and_report
from fairwin.window.environment import capture
from fairwin.window.hold import Hold, fixed_role_urls
from fairwin.window.layout import WindowDir, http_errors_logged, new_window_id
from fairwin.window.lock import acquire, coordinator, lock_path, release
from fairwin.window.preflight import Preflight, draw_order, preflight, preflight_power
from fairwin.window.start import Launcher, StartContext, local_launcher, run_start


@dataclass
class WindowResult:
    window: WindowDir
    decision: Decision
    rows: list[PooledRow] = field(default_factory=list)


@dataclass(frozen=True)
class Step:
    name: str
    action: Callable[[], Awaitable[dict[str, Any] | None]]  # what it returns is journaled with its end


def _quiet(_: str) -> None:
    return None


@dataclass
class Window:
    """One window of a plan and mode, past its gates, with a directory of its own; ``run`` runs its steps."""

    loaded: LoadedPlan
    checked: Preflight
    directory: WindowDir
    order: str
    starts: list[StartSpec]
    gate_summary: dict[str, Any]
    environment: dict[str, Any]
    archive_file: Path
    power_warnings: list[str]
    launcher: Launcher
    say: Callable[[str], None]
    hold: Hold | None = None  # production's hardware, when the plan has a [production]
    lock: Path | None = None  # the hardware's lock this window holds until its close
    archived: bool = False
    rows: list[PooledRow] = field(default_factory=list)
    decision: Decision | None = None
    # One context for every start: it carries the prompts the first start prepared.
    context: StartContext = field(init=False)

    def __post_init__(self) -> None:
        self.context = StartContext(loaded=self.loaded, window=self.directory, launcher=self.launcher, say=self.say)

    @property
    def commit(self) -> str | None:
        commit = self.environment.get("git", {}).get("commit")
        return commit if isinstance(commit, str) else None

    def steps(self) -> list[Step]:
        starts = [Step(f"start {start.name}", partial(self.start, start)) for start in self.starts]
        if self.hold is not None:
            first, last = self.starts[0].name, self.starts[-1].name
            starts = [
                Step("production down", self.hold.take_down),
                Step("quiet", partial(self.hold.prove_quiet, f"before {first}")),
                *starts,
                Step("quiet after", partial(self.hold.prove_quiet, f"after {last}")),
                Step("restore", self.hold.give_back),
            ]
        return [Step("open", self.open), *starts, Step("decide", self.decide), Step("archive", self.archive),
                Step("budget", self.budget)]  # fmt: skip

    async def open(self) -> dict[str, Any]:
        """Copy the plan and write window.json: what is about to run, and under which rule and gates."""
        shutil.copyfile(self.loaded.path, self.directory.plan_copy)
        write_json_atomic(self.directory.manifest, self._manifest())
        self.say(f"window {self.directory.window_id} opened at {self.directory.path} ({self.order})")
        # Into the journal too: what a recovery restores is the declaration as it was when the window opened.
        production = self.hold.snapshot if self.hold is not None else None
        return {"plan_sha256": self.loaded.sha256, "production": production}

    def _manifest(self) -> dict[str, Any]:
        mode, rule = self.checked.mode, self.checked.rule
        return {
            "format": WINDOW.id,
            "window_id": self.directory.window_id,
            "mode": self.checked.mode_name,
            "control_role": mode.control,
            "candidate_role": mode.candidate,
            "order": self.order,
            "starts": [{"start": s.name, "kind": s.kind, "role": s.role} for s in self.starts],
            "plan_path": str(self.loaded.path),
            "plan_sha256": self.loaded.sha256,
            "rule_id": rule.id,
            "rule_sha256": rule.sha256,
            "archive": str(self.archive_file),
            "power_warnings": self.power_warnings,
            "gates": self.gate_summary,
            "families": {
                name: {"prompts_sha256": fam.prompts_sha256, "order_sha256": fam.order_sha256}
                for name, fam in self.loaded.families.items()
            },
            "environment": self.environment,
            "production": self.hold.snapshot if self.hold is not None else None,
        }

    async def start(self, start: StartSpec) -> None:
        self.rows.extend(await run_start(self.context, start))

    async def decide(self) -> None:
        self.decision = decide_and_report(
            self.loaded, self.directory, mode=self.checked.mode_name, order=self.order, rule=self.checked.rule,
            archive=self.archive_file, commit=self.commit, production=self.hold.line() if self.hold else None,
        )  # fmt: skip

    async def archive(self) -> None:
        """Every finished control start into the control archive (also from a window that failed later)."""
        finished = {row.start for row in self.rows}
        controls = {s.name: s.role for s in self.starts if s.kind == "control" and s.name in finished}
        count = archive_controls(
            self.loaded, self.directory, mode=self.checked.mode_name, archive=self.archive_file, commit=self.commit,
            controls=controls,
        )  # fmt: skip
        self.archived = True
        self.say(f"archived {count} control rows in {self.archive_file}")

    async def budget(self) -> None:
        record = {"format": BUDGET.id, "estimate": self.gate_summary["budget"],
                  "actual_s": actual_times(self.directory.journal)}  # fmt: skip
        write_json_atomic(self.directory.path / "budget.json", record)

    async def run(self) -> WindowResult:
        """Every step in order, journaled; then close: the window's final status, whatever happened. The
        hardware's lock is released last, once production is given back and the status written."""
        try:
            await self._steps_then_close()
        finally:
            if self.lock is not None:
                release(self.lock, self.directory.window_id)
        assert self.decision is not None  # the decide step ran
        return WindowResult(window=self.directory, decision=self.decision, rows=self.rows)

    async def _steps_then_close(self) -> None:
        try:
            with (
                http_errors_logged(self.directory.path / "http-errors.log"),
                ClientAffinity(self.loaded.plan.window.client_cpus),
            ):
                for step in self.steps():
                    await self._journaled(step)
        except asyncio.CancelledError:
            interrupted = Interrupted("interrupted; every server was stopped")
            await self.close(interrupted)
            raise interrupted from None
        except BaseException as exc:
            await self.close(exc)
            raise
        await self.close(None)

    async def _journaled(self, step: Step) -> None:
        self.directory.journal_event(step.name, "begin")
        try:
            details = await step.action()
        except asyncio.CancelledError:
            self.directory.journal_event(step.name, "interrupted")
            raise
        except BaseException as exc:
            self.directory.journal_event(step.name, "failed", error=str(exc), error_type=type(exc).__name__)
            raise
        self.directory.journal_event(step.name, "end", **(details or {}))

    async def close(self, error: BaseException | None) -> None:
        """The final status, journaled: production given back if it is still owed, then complete with the
        verdict and decision.json's digest, or why not. A failed restore is raised as RestoreFailed (exit 6)."""
        self.directory.journal_event("close", "begin")
        restore_failure = await self._give_back_if_owed()
        if error is not None and not self.archived and self.rows:
            # The runbook keeps every finished control start, whatever happened to the window after it.
            with contextlib.suppress(FairwinError, OSError):
                await self.archive()
        restore = {"restore": self.hold.restored} if self.hold is not None else {}
        if error is None and restore_failure is None:
            assert self.decision is not None  # the decide step ran
            # decision.json's own digest: a later edit of the decision itself is seen too (fairwin decide WINDOW).
            digest = sha256_file(self.directory.decision)
            self.directory.set_status("complete", verdict=self.decision.verdict, decision_sha256=digest, **restore)
        elif isinstance(error, Interrupted):
            self.directory.set_status(
                "interrupted", error="interrupted (Ctrl-C or SIGTERM); every server was stopped", **restore
            )
        else:
            failed = error or restore_failure
            message = str(failed) if isinstance(failed, FairwinError) else repr(failed)
            self.directory.set_status("failed", error=message, error_type=type(failed).__name__, **restore)
        for raised in (error, restore_failure):
            if isinstance(raised, FairwinError):
                raised.window_path = self.directory.path
        state = "complete" if error is None and restore_failure is None else type(error or restore_failure).__name__
        self.directory.journal_event("close", "end", state=state, **restore)
        if restore_failure is not None and not isinstance(error, RestoreFailed):
            if error is not None:  # loud: the restore failed, and the window had failed before it
                restore_failure = RestoreFailed(f"{restore_failure} (after: {error})")
                restore_failure.window_path = self.directory.path
            raise restore_failure

    async def _give_back_if_owed(self) -> RestoreFailed | None:
        """The restore step, journaled like every other, when a failure skipped it; its failure returned."""
        if self.hold is None or not self.hold.owed:
            return None
        try:
            await self._journaled(Step("restore", self.hold.give_back))
        except RestoreFailed as exc:
            return exc
        return None


class WindowOptions(TypedDict, total=False):
    """How :func:`open_window` and :func:`run_window` may be told to run a window; all optional."""

    launcher: Launcher  # starts each role's server (tests inject their own)
    say: Callable[[str], None]  # progress lines
    output_dir: Path | None  # where the window's directory is made (default: the plan's window.output_dir)
    order: str | None  # overrides the rule's draw (tests; chained windows that balance orders)
    gates: GateInputs | None  # the receipts the window must be given
    coordinator: str | None  # who runs it, for the lock (default: FAIRWIN_COORDINATOR, else the user)


def open_window(loaded: LoadedPlan, mode_name: str, **options: Unpack[WindowOptions]) -> Window:
    """Preflight and gates, then a new window directory: everything before the first journaled step."""
    say = options.get("say", _quiet)
    checked = preflight(loaded, mode_name)
    out = loaded.output_dir(options.get("output_dir"))
    gate_summary = run_gates(loaded, mode_name, checked.mode, options.get("gates") or GateInputs(), out)
    say(f"gates passed; estimated {gate_summary['budget']['measurement_end_s'] / 60:.1f} min of measurement")
    environment = capture(loaded.base_dir)
    archive = archive_path(loaded, out)
    warnings = preflight_power(loaded, checked.rule, archive, environment.get("git", {}).get("commit"))
    for warning in warnings:
        say(f"warning: {warning}")
    chosen_order = options.get("order") or draw_order(checked.rule)
    hold = None  # made before the lock is taken: nothing after the lock may fail short of the directory
    if loaded.plan.production is not None:
        production = Production(loaded, out)
        roles = {checked.mode.control, checked.mode.candidate}
        hold = Hold(production, fixed_role_urls(loaded, roles), say, snapshot=production.snapshot())
    lock = lock_path(loaded, out)
    window_id = new_window_id(mode_name)
    acquire(lock, window_id, out / window_id, coordinator(options.get("coordinator")))
    try:
        directory = WindowDir.create(out, mode_name, window_id)
    except BaseException:
        release(lock, window_id)
        raise
    return Window(
        loaded=loaded, checked=checked, directory=directory, order=chosen_order,
        starts=starts_for(checked.mode, chosen_order, checked.rule.start_count), gate_summary=gate_summary,
        environment=environment, archive_file=archive, power_warnings=warnings,
        launcher=options.get("launcher", local_launcher), say=say, hold=hold, lock=lock,
    )  # fmt: skip


async def run_window(loaded: LoadedPlan, mode_name: str, **options: Unpack[WindowOptions]) -> WindowResult:
    """Run one window: :func:`open_window`, then every step of it."""
    return await open_window(loaded, mode_name, **options).run()
