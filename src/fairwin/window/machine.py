"""The window as an object with one method per journaled step: open, production down, quiet, each start,
quiet after, restore, decide, archive, budget, then close.

Each step is journaled (directory/journal.py) before it acts and as it ends or fails, so
a reader, ``fairwin recover`` and chained windows know exactly how far a window got.
``steps()`` lists them in order. The open step is window/opening.py; the close, which runs
whatever happened, shielded from a second signal, and gives production back when it is
still owed, is window/closing.py, with how each step is journaled.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from functools import partial

from fairwin.archive.window_rows import control_rows
from fairwin.custody.chain import ChainedWindow, HeldOver
from fairwin.custody.hold import Hold
from fairwin.custody.team_hold import TeamHold
from fairwin.decision import Decision
from fairwin.directory.gate_summary import BudgetRecord
from fairwin.directory.journal import HOLD_STEP, RELEASE_STEP, look_step, read_whole, start_step, step_times
from fairwin.directory.layout import WindowDir, http_errors_logged
from fairwin.directory.window_records import WindowRecords
from fairwin.errors import ArchiveError, Interrupted, RestoreFailed
from fairwin.launch.scheduling import ClientAffinity
from fairwin.plan.schedule import diagnosed_starts
from fairwin.production.live_check import compares_live
from fairwin.records import write_record
from fairwin.rows import PooledRow
from fairwin.telemetry import watchdog
from fairwin.telemetry.gpu import GpuSource
from fairwin.telemetry.hold_clocks import HOLD_TELEMETRY, HoldClocks, between_starts_clocks
from fairwin.telemetry.sampler import sampling
from fairwin.telemetry.watched_hosts import window_gpus
from fairwin.verdict.observed import clocks_unobserved, gpus_unobserved, production_unobserved
from fairwin.verdict.stored import Deciding, decide_and_report
from fairwin.window.closing import ArchiveEnd, Closing, Step
from fairwin.window.looks import unspent_line
from fairwin.window.measuring import Measuring
from fairwin.window.opening import Opening
from fairwin.window.preflight import planned_keys
from fairwin.window.progress import ProgressFeed
from fairwin.window.start_context import StartContext


@dataclass
class WindowResult:
    window: WindowDir
    decision: Decision
    rows: list[PooledRow] = field(default_factory=list)


class Window(Opening, Closing):
    """One window of a plan and mode, past its gates, with a directory of its own; ``run`` runs its steps.

    Its state is :class:`~fairwin.window.state.WindowState`'s, declared once for this class and the open and
    close it is made of."""

    def __post_init__(self) -> None:
        self.feed = ProgressFeed(self.directory.window_id, self.admission.options.progress)
        greedy = diagnosed_starts(self.loaded.plan.diagnostics.greedy, self.checked.mode_name, self.fixed.starts)
        self.context = StartContext(
            loaded=self.loaded,
            site=self.site,
            window=self.directory,
            launcher=self.launcher,
            say=self.say,
            gpu=self.gpu,
            feed=self.feed,
            greedy_starts=greedy,
            live=self.live,
        )
        rule, budget = self.checked.rule, self.gate_summary.budget
        self.measuring = Measuring(
            self.measured, self.context, self.fixed.starts, rule, self.archive_starts, budget, self._deciding
        )
        if self.loaded.plan.custody.hold_command:
            self.custody.team_hold = self._team_hold()
        if self.custody.chain is not None and not self.custody.chain.last and self.custody.hold is not None:
            # The placeholders take the hardware before the last start's servers let go of it.
            self.context.before_stop = partial(self.measuring.placeholders_if_last, self.custody.chain)
            self.custody.hold.tolerated = self.custody.chain.started

    def _team_hold(self) -> TeamHold:
        """The team's own hold ([custody]). One hold across a chain: taken by its first window, released at its end,
        and owed back from this window's first step should it abort."""
        team = TeamHold(self.site, self.directory.window_id, self.directory.path)
        chain = self.custody.chain
        if chain is not None:
            carried = chain.found.team_hold if chain.found is not None else None
            team.held_since = carried.window_id if carried is not None else None
            team.held = carried is not None
            chain.team_hold = carried or ChainedWindow(
                window_id=self.directory.window_id,
                window_path=str(self.directory.path),
                mode=self.checked.mode_name,
                order=self.fixed.order,
            )
        return team

    def steps(self) -> list[Step]:
        starts: list[Step] = []
        measuring = self.measuring
        for number, start in enumerate(self.fixed.starts, 1):
            starts.append(
                Step(start_step(start.name), partial(measuring.start, start), partial(measuring.skipped, start))
            )
            if number in measuring.looks and number < len(self.fixed.starts):
                starts.append(Step(look_step(start.name), partial(measuring.look, number), measuring.stopped))
        if self.custody.hold is not None:
            hold = self.custody.hold
            starts = [
                self._down_step(hold),
                Step("quiet", partial(hold.prove_quiet, f"before {self.fixed.starts[0].name}")),
                *starts,
                Step("quiet after", lambda: hold.prove_quiet(f"after {measuring.last_start()}")),
                *self._end_steps(hold),
            ]
        team, chain = self.custody.team_hold, self.custody.chain
        if team is not None:  # the team's hold around everything that touches the hardware
            starts = [Step(HOLD_STEP, team.take), *starts]
            held_over = chain is not None and not chain.last  # the chain's next window carries it on
            if team.settings.release_command and not held_over:
                starts.append(Step(RELEASE_STEP, self.release_team_hold))
        return [
            Step("open", self.open),
            *starts,
            Step("decide", self.decide),
            Step("archive", self.archive),
            Step("budget", self.budget),
        ]

    def _down_step(self, hold: Hold) -> Step:
        """Production taken down; or, continuing a chain, proved still down with the placeholders taken down."""
        if self.custody.chain is not None and self.custody.chain.found is not None:
            return Step("production down", partial(self.custody.chain.take_over, hold))
        return Step("production down", hold.take_down)

    def _end_steps(self, hold: Hold) -> list[Step]:
        """The restore and watch; or, chained, production left down under placeholders (and the marker)."""
        if self.custody.chain is not None and not self.custody.chain.last:
            here = ChainedWindow(
                window_id=self.directory.window_id,
                window_path=str(self.directory.path),
                mode=self.checked.mode_name,
                order=self.fixed.order,
            )
            return [Step("chain hold", partial(self._hold_over, hold, here))]
        restore = Step("restore", hold.give_back)
        return (
            [restore, Step("chain end", partial(self.custody.chain.finish, hold))]
            if self.custody.chain is not None
            else [restore]
        )

    async def _hold_over(self, hold: Hold, here: ChainedWindow) -> HeldOver:
        """The chained close; the team's hold, where there is one, goes on with the chain (its last window, or an
        abort, releases it)."""
        assert self.custody.chain is not None
        held = await self.custody.chain.hold_over(hold, here)
        if self.custody.team_hold is not None:
            self.custody.team_hold.kept_for_chain = True
        return held

    def _deciding(self) -> Deciding:
        """What the looks and the decide step decide with: the archive as read at open, the rule, the order."""
        return Deciding(
            mode=self.checked.mode_name,
            order=self.fixed.order,
            rule=self.checked.rule,
            snapshot=self.archive_snapshot,
            planned=planned_keys(self.site, self.checked.mode_name, self.production_cap[0]),
            production_cap_mhz=self.production_cap[0],
            failed_starts=tuple(self.measured.failed),
        )

    def _held_lines(self) -> list[str]:
        """The summary's lines about the hardware: production's restore, and the chain."""
        hold, chain, team = self.custody.hold, self.custody.chain, self.custody.team_hold
        said = [hold.line() if hold else None, chain.line() if chain else None, team.line() if team else None]
        return [line for line in said if line]

    async def decide(self) -> None:
        records = WindowRecords.read(self.directory)  # each of the window's files read once for the decision
        accepted = self.loaded.plan.runtime.accept_unobserved
        decision = self.outcome.decision = decide_and_report(
            self.loaded,
            self.directory,
            self._deciding(),
            records=records,
            held=self._held_lines(),
            production_caps_by_host=self.fixed.node_caps,
            stop_reason=self.measured.stopped if self.measured.stopped not in (None, "decided") else None,
            hold_clocks=await self._hold_clocks(records),
            unobserved=[
                *clocks_unobserved(accepted, self.clocks.unwatched),
                *gpus_unobserved(accepted, self.clocks.gpus_unread),
                *production_unobserved(self.live, self._compared_with_production()),
            ],
        )
        if decision.sequential is not None:
            self.say(unspent_line(decision.sequential, decision.verdict, self.fixed.starts, self.gate_summary.budget))

    async def _held_gpus(self) -> GpuSource | None:
        """The GPUs of every host the window touches: production's hold's, or, without production, those its
        roles run on (their gaps between starts are watched the same)."""
        if self.custody.hold is not None:
            return self.custody.hold.gpu
        return window_gpus(self.admission.sources)

    def _compared_with_production(self) -> list[str]:
        return [r for r in self.site.roles if compares_live(self.site, r)]

    async def _hold_clocks(self, records: WindowRecords) -> HoldClocks:
        """The dial-backs and re-locks the hold's sampler saw between starts, and what each watchdog logged."""
        telemetry = self.loaded.plan.telemetry
        dialbacks, relocks = between_starts_clocks(self.measured.hold_sampler, self.directory, records, telemetry)
        return HoldClocks(
            dialbacks=dialbacks,
            relocks=relocks,
            watchdog=await watchdog.events(self.site, dict(self.clocks.watchdog_marks)),
        )

    async def archive(self) -> ArchiveEnd:
        """Every finished control start into the control archive (also from a window that failed later). An
        archive that cannot be written loses nothing and fails nothing: the rows are rebuilt from the window's
        directory by the command the warning names, and the archive skips what it already holds."""
        self.outcome.archived = True
        try:
            appended = self.archive_store.append(control_rows(self.directory))
        except (ArchiveError, OSError) as exc:
            self.outcome.archive_problem = (
                f"{exc}; nothing of the window is lost: append its control starts with "
                f"`fairwin archive append {self.directory.path}`"
            )
            self.say(f"warning: the control archive was not appended: {self.outcome.archive_problem}")
            return ArchiveEnd(appended=False, error=str(exc))
        self.say(
            f"archived {appended.added} control rows in {self.archive_store.location}"
            + (f" ({appended.already} were there already)" if appended.already else "")
        )
        return ArchiveEnd(appended=True, added=appended.added, already=appended.already)

    async def budget(self) -> None:
        record = BudgetRecord(
            estimate=self.gate_summary.budget,
            actual_s=step_times(read_whole(self.directory.journal)),
        )
        write_record(self.directory.budget, record)

    async def run(self) -> WindowResult:
        """Every step in order, journaled; then close: the window's final status, whatever happened. The
        hardware's lock is released last, once production is given back and the status written."""
        try:
            await self._steps_then_close()
        finally:
            for problem in self.custody.hardware.release() if self.custody.hardware is not None else ():
                self.say(f"warning: {problem}; `fairwin recover PLAN` releases it")
        assert self.outcome.decision is not None  # the decide step ran
        return WindowResult(window=self.directory, decision=self.outcome.decision, rows=self.measured.rows)

    async def _steps_then_close(self) -> None:
        try:
            gpus = await self._held_gpus()  # the hold's GPUs, watched between starts too
            hold_samples = self.directory.path / HOLD_TELEMETRY
            with (
                http_errors_logged(self.directory.http_errors),
                ClientAffinity(self.loaded.plan.window.client_cpus),
            ):
                async with sampling(
                    gpus, hold_samples, self.loaded.plan.telemetry.interval_s
                ) as self.measured.hold_sampler:
                    self.context.hold_sampler = self.measured.hold_sampler
                    for step in self.steps():
                        if step.skip is None or not step.skip():
                            await self._step(step)
        except asyncio.CancelledError:
            interrupted = Interrupted("interrupted; every server was stopped")
            await self._close_shielded(interrupted)
            raise interrupted from None
        except BaseException as exc:
            await self._close_shielded(exc)
            raise
        await self._close_shielded(None)

    async def _step(self, step: Step) -> None:
        try:
            await self._journaled(step)
        except RestoreFailed as exc:
            # The starts are measured: the window still decides, archives and says RESTORE FAILED in its
            # summary and status; close raises this afterwards (exit 6).
            self.outcome.restore_failure = exc
