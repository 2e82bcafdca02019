"""Chained windows: window after window without giving production back in between (docs/chain.md).

A window run with ``--chain`` ends **CHAINED**: after its last start it starts the
plan's placeholders (proved running), proves production still down and the hardware
quiet, and writes the **marker** (atomically): the chain's windows and their orders,
production's snapshot as it was taken down, the commit under test, the coordinator and
the placeholders' pids. The next ``--chain`` or ``--chain-last`` window finds the
marker, checks it (:func:`continuation_problems`), takes the placeholders down instead
of taking production down, and opens without a restore. ``--chain-last`` ends with the
restore and the watch and clears the marker only when the watch held. Any failure
inside a chained window **aborts** the chain: placeholders down, production restored
and watched, the marker cleared, and the window's decision **REJECT**.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from fairwin.custody.chain_receipts import ChainEndReceipt, write_end
from fairwin.custody.hold import Hold
from fairwin.decision import RuleSpec
from fairwin.directory.declaration import ProductionDeclaration
from fairwin.directory.layout import WindowDir
from fairwin.directory.status import ChainRecord, Restore, TeamRelease, WindowStatus
from fairwin.errors import InputError, ProductionError
from fairwin.formats import CHAIN_MARKER, RecordFormat
from fairwin.gates.qualify import successor_problems
from fairwin.plan.site import Site
from fairwin.production.placeholder_record import RunningPlaceholder
from fairwin.production.placeholders import Placeholders, not_running
from fairwin.production.state_records import SnapshotRecord
from fairwin.records import Record, read_record, write_record
from fairwin.rows import Order

#: Wins over the plan's ``[chain] marker``: a test suite points it at a scratch path.
MARKER_ENV = "FAIRWIN_CHAIN_MARKER"

ChainEnd = Literal["CHAINED", "ENDED", "ABORTED"]


def marker_path(site: Site, output_dir: Path) -> Path:
    if env := os.environ.get(MARKER_ENV):
        return Path(env)
    setting = site.plan.chain.marker
    return site.resolve(setting) if setting is not None else output_dir / ".chain.json"


class ChainedWindow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    window_id: str
    window_path: str
    mode: str
    order: Order


class Marker(Record):
    """``fairwin.chain-marker/1``: a chain in progress, production left down by its last window."""

    record_format: ClassVar[RecordFormat] = CHAIN_MARKER
    model_config = ConfigDict(extra="forbid")

    format: Literal["fairwin.chain-marker/1"] = "fairwin.chain-marker/1"
    chain_id: str
    windows: list[ChainedWindow] = Field(min_length=1)
    production: ProductionDeclaration  # production as it was taken down, with its sha256
    commit: str | None
    coordinator: str
    time: float
    placeholders: list[RunningPlaceholder]
    placeholder_dir: str
    # The team's hold ([custody] hold_command), taken by this window of the chain and held across it: released
    # once, after the restore that ends the chain (the runbook's one HOLD across its chained windows).
    team_hold: ChainedWindow | None = None
    # Where production is a Slurm job: the job whose allocation holds the chain's nodes from its first window to
    # its last (`fairwin submit --chain`); every window of the chain runs in it, else Slurm could have run
    # production between two of them.
    slurm_job: str | None = None

    @property
    def last(self) -> ChainedWindow:
        return self.windows[-1]

    def aborted(
        self,
        reason: str,
        restore: Restore | None,
        placeholders: list[str],
        window_id: str | None = None,
        team_release: TeamRelease | None = None,
    ) -> ChainEndReceipt:
        """The receipt of this chain aborted outside a window's own close (``window_id``: the window fairwin died
        in, where one did): its decision REJECT, why, and the restore's proof."""
        return ChainEndReceipt(
            time=time.time(),
            chain_id=self.chain_id,
            end="ABORTED",
            decision="REJECT",
            window_id=window_id,
            windows=[*(w.window_id for w in self.windows), *([window_id] if window_id else [])],
            reason=reason,
            restore=restore,
            placeholders=placeholders,
            coordinator=self.coordinator,
            team_release=team_release,
        )


def handed_back(hold: Hold) -> bool:
    """Production restored, or handed back to Slurm for its job to prove once the window's job ends."""
    return hold.restored is not None and (hold.restored.restored or hold.restored.state == "RETURNING")


def read_marker(path: Path) -> Marker | None:
    """The chain in progress, or None; a damaged marker is refused (exit 2), never guessed around."""
    return read_record(path, Marker) if path.exists() else None


def in_progress(path: Path, found: Marker) -> str:
    """How a refusal names the chain in progress: its marker and the window that left production down."""
    return f"a chain is in progress ({path}: production left down by window {found.last.window_id})"


def chained_order(rule: RuleSpec, marker: Marker | None) -> Order | None:
    """With a rule that randomizes bracket order, a chain alternates: the opposite of its last window's order,
    so order effects cancel across the chain. None: draw as usual (a new chain, or a fixed order)."""
    if rule.order == "control-first" or marker is None:
        return None
    return "candidate-first" if marker.last.order == "control-first" else "control-first"


async def continuation_problems(
    site: Site,
    marker: Marker,
    *,
    snapshot: ProductionDeclaration,
    commit: str | None,
    capture: Path | None = None,
) -> list[str]:
    """Why the next window may not continue this chain: production's declaration, the commit under test, the
    previous window, the placeholders. Empty when it may."""
    problems = []
    if capture is not None:
        captured = read_record(capture, SnapshotRecord)
        if captured.sha256 != snapshot.sha256:
            problems.append(
                f"{capture} is not production as the plan declares it now (sha256 "
                f"{str(captured.sha256)[:12]} there, {snapshot.sha256[:12]} now)"
            )
    elif marker.production.sha256 != snapshot.sha256:
        then = marker.production.sha256[:12]
        problems.append(
            f"production's declaration changed since the chain left it down ({then} then, {snapshot.sha256[:12]} "
            "now); capture it with `fairwin production snapshot PLAN --out FILE` and name it with --chain-production"
        )
    if marker.commit is not None and commit != marker.commit:
        if commit is None:
            problems.append(f"the chain runs commit {marker.commit[:12]}, and the plan is not in a git work tree now")
        else:
            rules = site.plan.qualification
            problems += successor_problems(site.resolve(rules.repo), rules, marker.commit, commit)
    previous = WindowDir.at(marker.last.window_path).status
    try:
        state: str = read_record(previous, WindowStatus).state
    except InputError as exc:
        state = f"unreadable ({exc})"
    if state != "complete":
        problems.append(f"the chain's previous window {marker.last.window_id} is {state}, not complete")
    problems += await not_running(site, marker.placeholders)
    return problems


class TakenOver(BaseModel):
    """The take-down step of a window continuing a chain: who left production down, the placeholders stopped."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    left_down_by: str
    placeholders: list[str]


class HeldOver(BaseModel):
    """The chain hold step, instead of the restore: the marker written, the placeholders holding the hardware."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    marker: str
    chain_id: str
    placeholders: list[RunningPlaceholder]
    placeholders_started: str  # "before the last start's servers stopped", or "at the chained close"


class MarkerFate(BaseModel):
    """The chain end step: the marker cleared, or kept for ``fairwin chain abort`` (production not restored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    marker: Literal["kept", "cleared"]


class Stopped(BaseModel):
    """The chain abort step: each placeholder taken down, one line each."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    placeholders: list[str]


class ChainAborted(Stopped):
    """``fairwin chain abort``: the chain and its windows, the placeholders stopped, production's restore."""

    chain_id: str
    windows: list[str]
    restore: Restore
    notes: list[str]


@dataclass
class ChainRun:
    """One window's part in a chain: taking over from the previous window, holding over to the next, or aborting."""

    marker_path: Path
    placeholders: Placeholders
    last: bool  # --chain-last: this window ends the chain with the restore
    found: Marker | None  # the chain this window continues; None: it starts one
    snapshot: ProductionDeclaration
    commit: str | None
    coordinator: str
    ledger_dir: Path  # where the chain's ends are receipted (the output directory: chain_receipts.py)
    team_hold: ChainedWindow | None = None  # the window whose team hold the chain holds (the marker's, or this one's)
    started: list[RunningPlaceholder] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)  # an abort's placeholders taken down, one line each
    end: ChainEnd | None = None
    reason: str | None = None
    chain_id: str | None = None  # the chain's id, once known: continued, or started by this window's hold over
    slurm_job: str | None = None  # on a cluster, the chain's hold job, which the window runs in (Marker.slurm_job)

    @property
    def position(self) -> int:
        return len(self.found.windows) + 1 if self.found is not None else 1

    async def take_over(self, hold: Hold) -> TakenOver:
        """The chain left production down: prove it still is, then take the placeholders down."""
        assert self.found is not None
        hold.taken = True  # from here a failure gives production back
        if problems := await hold.production.down_problems():
            raise ProductionError(f"the chain left production down, but it is not: {'; '.join(problems)}")
        stopped = await self.placeholders.stop(self.found.placeholders)
        return TakenOver(left_down_by=self.found.last.window_id, placeholders=stopped)

    async def start_placeholders(self) -> list[RunningPlaceholder]:
        """The placeholders started and proved (once): at the end of the window's last start, before its servers
        let go of the hardware; :meth:`hold_over` starts them where that start did not (a window that stopped
        early)."""
        if not self.started:
            self.started.extend(await self.placeholders.start())  # in place: the hold tolerates this very list
        return self.started

    async def hold_over(self, hold: Hold, window: ChainedWindow) -> HeldOver:
        """Instead of the restore: placeholders started (unless the last start did) and proved still running,
        production proved down, the marker written."""
        early = bool(self.started)
        await self.start_placeholders()
        if problems := await hold.production.down_problems():
            raise ProductionError(f"production is not down at the chained close: {'; '.join(problems)}")
        if problems := await self.placeholders.not_running(self.started):
            raise ProductionError(
                f"placeholders are not holding the hardware at the chained close: {'; '.join(problems)}"
            )
        new_id = f"chain-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(3)}"
        marker = Marker(
            format="fairwin.chain-marker/1",
            chain_id=self.found.chain_id if self.found else new_id,
            windows=[*(self.found.windows if self.found else []), window],
            production=self.snapshot,
            commit=self.commit,
            coordinator=self.coordinator,
            time=time.time(),
            placeholders=self.started,
            placeholder_dir=str(self.placeholders.state_dir),
            team_hold=self.team_hold,
            slurm_job=self.slurm_job,
        )
        write_record(self.marker_path, marker)
        self.chain_id = marker.chain_id
        hold.restored = Restore(
            state="CHAINED", reason="production left down", placeholders=[p.name for p in self.started]
        )
        self.end = "CHAINED"
        started = "before the last start's servers stopped" if early else "at the chained close"
        return HeldOver(
            marker=str(self.marker_path),
            chain_id=marker.chain_id,
            placeholders=self.started,
            placeholders_started=started,
        )

    async def finish(self, hold: Hold) -> MarkerFate:
        """After the last window's restore: the chain is over when the watch held, or production was handed back to
        Slurm (RETURNING: its return is proved once the chain's job ends, and owed by this window); else the marker
        stays, for ``fairwin chain abort`` once production is fixed."""
        if not handed_back(hold):
            self.reason = "production was not restored; the marker is kept for `fairwin chain abort`"
            return MarkerFate(marker="kept")
        self.marker_path.unlink(missing_ok=True)
        self.end = "ENDED"
        return MarkerFate(marker="cleared")

    async def abort(self, reason: str) -> Stopped:
        """A failure inside the chain: every placeholder down (the previous window's and this one's) before
        production is given back; the marker is cleared once it is (:meth:`cleared`)."""
        self.end, self.reason = "ABORTED", reason
        listed = [*(self.found.placeholders if self.found else []), *self.started]
        self.stopped = await self.placeholders.stop_all(listed)
        return Stopped(placeholders=self.stopped)

    def cleared(self, hold: Hold) -> None:
        """Clear the marker of an aborted chain once production is back, or handed back to Slurm (a failed restore
        keeps it)."""
        if handed_back(hold):
            self.marker_path.unlink(missing_ok=True)

    def record(self, *, with_last: bool = False) -> ChainRecord:
        """For status.json and the summary; window.json's says ``last`` too (``with_last``)."""
        chain_id = self.found.chain_id if self.found else self.chain_id
        given: dict[str, Any] = {"chain_id": chain_id} if chain_id else {}  # only the fields this record has
        if self.end == "ABORTED":
            given |= {"decision": "REJECT", "reason": self.reason}
        if with_last:
            given["last"] = self.last
        return ChainRecord(position=self.position, end=self.end, marker=str(self.marker_path), **given)

    def write_end(self, window_id: str, verdict: str | None, restore: Restore | None) -> None:
        """This window's end of its part in the chain, as a receipt in the ledger (once the chain has an end)."""
        if self.end is None:
            return
        windows = [*(w.window_id for w in (self.found.windows if self.found else [])), window_id]
        held = [p.name for p in self.started] if self.end == "CHAINED" else self.stopped
        write_end(
            self.ledger_dir,
            ChainEndReceipt(
                time=time.time(),
                chain_id=self.found.chain_id if self.found else self.chain_id,
                end=self.end,
                decision="REJECT" if self.end == "ABORTED" else None,
                verdict=verdict,
                window_id=window_id,
                windows=windows,
                reason=self.reason,
                restore=restore,
                placeholders=held,
                coordinator=self.coordinator,
            ),
        )

    def line(self) -> str:
        if self.end == "CHAINED":
            names = ", ".join(p.name for p in self.started) or "no placeholders"
            return f"chain: CHAINED (window {self.position} of the chain; production left down, {names} holding it)"
        if self.end == "ENDED":
            back = "handed back to Slurm" if self.snapshot.slurm_job else "restored"
            return f"chain: ENDED (window {self.position}, the last; production {back}, the marker cleared)"
        return f"chain: {self.end or 'running'}"
