"""A team's own hold on the hardware (``[custody]``), taken and released around a window.

The commands are the team's (a scoped HOLD script, a scheduler's reservation): fairwin
runs them, here or on the named host over SSH, with the window's id and path in their
environment, and keeps the tail of their output in the journal. A hold that fails
refuses the window before production is touched; a release that fails is said loudly and
left owed, so that ``fairwin recover PLAN`` runs it again.
"""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import ConfigDict

from fairwin.commands import runner
from fairwin.directory.journal import HOLD_STEP, RELEASE_STEP, JournalRow
from fairwin.directory.status import TeamRelease
from fairwin.errors import LaunchError
from fairwin.gates.refusal import refuse
from fairwin.plan.custody import CustodySettings
from fairwin.plan.site import Site
from fairwin.records import SparseModel

#: The lines of a command's output kept in the journal and said when it fails.
OUTPUT_LINES = 5


class TeamCommand(SparseModel):
    """The team hold or release step's journaled end: the command, its exit status (None: it did not run to its
    end) and last lines; a release says whether it released, and why not."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    argv: list[str]
    exit: int | None
    output: list[str]
    released: bool | None = None
    error: str | None = None
    held_by_chain_since: str | None = None  # a chain's hold, taken by that window and carried to this one


@dataclass(frozen=True)
class Ran:
    """One of the team's commands, run to its end: its exit status (None: it could not run) and last lines."""

    argv: list[str]
    where: str  # "" here, " on host NAME" there
    code: int | None
    output: list[str]

    def record(self) -> TeamCommand:
        return TeamCommand(argv=self.argv, exit=self.code, output=self.output)

    def failure(self, what: str) -> str:
        shown = " | ".join(self.output) or "no output"
        ended = f"exited {self.code}" if self.code is not None else "did not run to its end"
        return f"the team's {what} command {shlex.join(self.argv)}{self.where} {ended}: {shown}"


@dataclass
class TeamHold:
    """The plan's ``[custody]`` commands for one window."""

    site: Site
    window_id: str
    window_path: Path
    held: bool = False
    tried_release: bool = False
    released: bool = False
    error: str | None = None  # why the last release did not release

    @property
    def settings(self) -> CustodySettings:
        return self.site.plan.custody

    kept_for_chain: bool = False  # held over to the chain's next window: not this window's to release
    held_since: str | None = None  # the chain's window that took it, where this window continues a chain

    @property
    def owed(self) -> bool:
        """Taken, with a release to run, not yet tried (one that failed is left to recover), and not held over to
        the chain's next window."""
        return self.held and bool(self.settings.release_command) and not self.tried_release and not self.kept_for_chain

    async def take(self) -> TeamCommand:
        """The hold; GateRefused with its output when it exits non-zero (production not touched yet). A window
        continuing a chain that holds it already runs nothing: the hold is the chain's since ``held_since``."""
        if self.held_since is not None:
            self.held = True
            return TeamCommand(argv=[], exit=None, output=[], held_by_chain_since=self.held_since)
        ran = await self._run(self.settings.hold_command)
        refuse("team hold", [f"{ran.failure('hold')}; production was not touched"] if ran.code != 0 else [])
        self.held = True
        return ran.record()

    async def release(self) -> TeamCommand:
        """The release; its failure is returned in the record (``released: false``), never raised: the
        window's measurement and production's restore stand, and recover runs it again."""
        self.tried_release = True
        ran = await self._run(self.settings.release_command)
        self.released = ran.code == 0
        if self.released:
            self.error = None
            return TeamCommand(argv=ran.argv, exit=ran.code, output=ran.output, released=True)
        self.error = ran.failure("release")
        return TeamCommand(argv=ran.argv, exit=ran.code, output=ran.output, released=False, error=self.error)

    def state(self, attempts: int = 1) -> TeamRelease | None:
        """What status.json keeps of the release; None where none was tried."""
        if not self.tried_release:
            return None
        return TeamRelease(released=self.released, time=time.time(), error=self.error, attempts=attempts)

    def line(self) -> str | None:
        """The summary's line; None where no release was tried."""
        state = self.state()
        return f"team release: {state.said()}" if state is not None else None

    async def _run(self, argv: list[str]) -> Ran:
        env = {"FAIRWIN_WINDOW_ID": self.window_id, "FAIRWIN_WINDOW_PATH": str(self.window_path)}
        timeout = self.settings.timeout_s
        host = self.settings.host
        if host is None:
            try:
                here = await runner().run_async(argv, env={**os.environ, **env}, timeout_s=timeout, merge_stderr=True)
            except TimeoutError:
                return Ran(argv, "", None, [f"killed after its {timeout:g} s (custody.timeout_s)"])
            except OSError as exc:
                return Ran(argv, "", None, [f"could not run: {exc}"])
            return Ran(argv, "", here.status, here.out.strip().splitlines()[-OUTPUT_LINES:])
        from fairwin.launch.ssh import run_once  # asyncssh only where a host is used

        assigned = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
        try:
            done = await run_once(
                host, self.site.host(host), f"env {assigned} {shlex.join(argv)}", timeout, retry="action"
            )
        except LaunchError as exc:
            return Ran(argv, f" on host {host}", None, [str(exc)])
        output = str(done.stdout or "") + str(done.stderr or "")
        return Ran(argv, f" on host {host}", done.exit_status, output.strip().splitlines()[-OUTPUT_LINES:])


def release_owed(events: list[JournalRow]) -> bool:
    """Whether a window's journal shows the team's hold taken and no release that succeeded."""
    held = any(e.step == HOLD_STEP and e.event == "end" for e in events)
    released = any(e.step == RELEASE_STEP and e.event == "end" and e.details.get("released") for e in events)
    return held and not released
