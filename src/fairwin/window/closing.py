"""A window's close, and how each of its steps is journaled: the part of the window that runs whatever happened.

:class:`Closing` is mixed into :class:`~fairwin.window.machine.Window`, which shares
its state (:class:`~fairwin.window.state.WindowState`). Close writes the final status, gives
production back when it is still owed (a failed start, Ctrl-C, SIGTERM), aborts a chain a
failure ended, and is shielded from a second signal: only kill -9 stops it, and then
``fairwin recover`` finishes what the journal says is owed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict

from fairwin.custody.team_hold import TeamCommand
from fairwin.directory.journal import RELEASE_STEP
from fairwin.directory.status import ArchiveProblem
from fairwin.errors import FairwinError, Interrupted, RestoreFailed
from fairwin.files import sha256_file
from fairwin.records import SparseModel
from fairwin.verdict.stored import report_after_close
from fairwin.window.shield import to_the_end
from fairwin.window.state import WindowState


class ArchiveEnd(SparseModel):
    """The archive step's journaled end: the rows appended (and those the archive held already), or why not."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    appended: bool
    added: int | None = None
    already: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class Step:
    name: str
    action: Callable[[], Awaitable[BaseModel | None]]  # what it returns is journaled with its end
    # A start or a look: skipped, unjournaled, once a sequential window has stopped (and a start of a candidate a
    # many-arm window's look settled); None: always run.
    skip: Callable[[], bool] | None = None


class Closing(WindowState):
    """The close and the journaling of steps; the window's state they read is the window's own."""

    async def archive(self) -> ArchiveEnd:
        """The window's archive step (the window's own); the close retries it."""
        raise NotImplementedError

    async def _journaled(self, step: Step) -> None:
        self.directory.journal_event(step.name, "begin")
        self.feed.emit("step", step=step.name, state="begin")
        try:
            details = await step.action()
        except asyncio.CancelledError:
            self.directory.journal_event(step.name, "interrupted")
            self.feed.emit("step", step=step.name, state="interrupted")
            raise
        except BaseException as exc:
            self.directory.journal_event(step.name, "failed", error=str(exc), error_type=type(exc).__name__)
            self.feed.emit("step", step=step.name, state="failed", error=str(exc))
            raise
        ended = details.model_dump(mode="json") if details is not None else {}
        self.directory.journal_event(step.name, "end", **ended)
        self.feed.emit("step", step=step.name, state="end")

    async def _close_shielded(self, error: BaseException | None) -> None:
        """Close, which a second Ctrl-C, SIGTERM or SIGHUP must not cut short: production is being given back.
        Only kill -9 stops it, and then ``fairwin recover`` finishes what the journal says is owed."""
        await to_the_end(
            self.close(error),
            lambda: self.say("closing the window (stopping servers, giving production back); fairwin exits when done"),
        )

    async def close(self, error: BaseException | None) -> None:
        """The final status, journaled: production given back if it is still owed, then complete with the
        verdict and decision.json's digest, or why not. A failed restore is raised as RestoreFailed (exit 6)."""
        self.directory.journal_event("close", "begin")
        chain, hold, team = self.custody.chain, self.custody.hold, self.custody.team_hold
        if chain is not None and error is not None:
            await self._abort_chain(error)
        restore_failure = self.outcome.restore_failure or await self._give_back_if_owed()
        if team is not None and team.owed:  # a failure skipped the release step: after the restore
            await self._journaled(Step(RELEASE_STEP, self.release_team_hold))
        if chain is not None and hold is not None and chain.end == "ABORTED":
            chain.cleared(hold)
        if error is not None and not self.outcome.archived and self.measured.rows:
            # The runbook keeps every finished control start, whatever happened to the window after it.
            with contextlib.suppress(FairwinError, OSError):
                await self.archive()
        details = self._status_details()
        self._set_status(error, restore_failure, details)
        aborted = chain is not None and chain.end == "ABORTED"
        after = "chain ABORTED, decision REJECT; " + (hold.line() if hold else "") if aborted else None
        for raised in (error, restore_failure):
            if isinstance(raised, FairwinError):
                ended = "complete" if error is None else None  # a failed restore after a complete window
                raised.with_context(window_path=self.directory.path, window_state=ended, aftermath=after)
        decision = self.outcome.decision if error is None else None
        if chain is not None:  # the chain's end, with the restore's proof, in the output directory's ledger
            restore = hold.restored if hold is not None else None
            chain.write_end(self.directory.window_id, decision.verdict if decision else None, restore)
        state = "complete" if error is None else type(error).__name__
        self.directory.journal_event("close", "end", state=state, **details)
        if self.outcome.decision is not None and self.loaded.plan.window.report_html:
            report_after_close(self.directory, self.outcome.decision, self.say)
        self.feed.emit(
            "close", state=state, verdict=decision.verdict if decision else None, path=str(self.directory.path)
        )
        if restore_failure is not None and not isinstance(error, RestoreFailed):
            raise self._loud(restore_failure, error)

    def _status_details(self) -> dict[str, Any]:
        """What status.json and the close's journal row keep beside the state: the restore, an archive that did not
        append, the chain's part, the team's release."""
        details: dict[str, Any] = {}
        if self.custody.hold is not None:
            details["restore"] = self.custody.hold.restored
        if self.outcome.archive_problem is not None:
            details["archive"] = ArchiveProblem(appended=False, problem=self.outcome.archive_problem)
        if self.custody.chain is not None:
            details["chain"] = self.custody.chain.record()
        if self.custody.team_hold is not None and (team := self.custody.team_hold.state()) is not None:
            details["team_release"] = team  # one not released stays owed: `fairwin recover` finds it here
        return details

    def _set_status(
        self, error: BaseException | None, restore_failure: RestoreFailed | None, details: dict[str, Any]
    ) -> None:
        """status.json's final state: complete with the verdict and decision.json's digest, interrupted, or failed."""
        if error is None:
            assert self.outcome.decision is not None  # the decide step ran (a failed restore let it)
            # decision.json's own digest: a later edit of the decision itself is seen too (fairwin decide WINDOW).
            digest = sha256_file(self.directory.decision)
            self.directory.set_status(
                "complete", verdict=self.outcome.decision.verdict, decision_sha256=digest, **details
            )
        elif isinstance(error, Interrupted):
            self.directory.set_status(
                "interrupted", error="interrupted (Ctrl-C, SIGTERM or SIGHUP); every server was stopped", **details
            )
        else:
            failed = error or restore_failure
            message = str(failed) if isinstance(failed, FairwinError) else repr(failed)
            self.directory.set_status("failed", error=message, error_type=type(failed).__name__, **details)

    def _loud(self, restore_failure: RestoreFailed, error: BaseException | None) -> RestoreFailed:
        """The failed restore, with what else happened: the window's own failure, or its verdict."""
        if error is not None:
            after = f"after: {error}"
        else:
            assert self.outcome.decision is not None
            after = f"the window itself completed: {self.outcome.decision.verdict}, {self.directory.summary}"
        return RestoreFailed(f"{restore_failure} ({after})", window_path=self.directory.path)

    async def _abort_chain(self, error: BaseException) -> None:
        """A failure inside a chained window aborts the chain; its placeholders go before production comes back."""
        assert self.custody.chain is not None
        reason = str(error) if isinstance(error, FairwinError) else repr(error)
        with contextlib.suppress(Exception):  # a placeholder that will not stop must not keep production down
            await self._journaled(Step("chain abort", partial(self.custody.chain.abort, reason)))
        if (
            self.custody.hold is not None
            and self.custody.hold.restored is not None
            and self.custody.hold.restored.state == "CHAINED"
        ):
            self.custody.hold.restored = None  # left down for a chain that no longer is: production is owed again

    async def release_team_hold(self) -> TeamCommand:
        """The team's release step: a failure is said, journaled as not released, and left to recover."""
        assert self.custody.team_hold is not None
        record = await self.custody.team_hold.release()
        if not record.released:
            self.say(f"warning: {record.error}; release it by hand, or `fairwin recover PLAN` runs it again")
        return record

    async def _give_back_if_owed(self) -> RestoreFailed | None:
        """The restore step, journaled like every other, when a failure skipped it; its failure returned."""
        if self.custody.hold is None or not self.custody.hold.owed:
            return None
        try:
            await self._journaled(Step("restore", self.custody.hold.give_back))
        except RestoreFailed as exc:
            return exc
        return None
