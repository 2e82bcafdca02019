"""How a chain ends outside its windows, and where it stands: ``fairwin chain abort``, ``check-prev`` and ``status``.

An abort takes every placeholder down, gives production back and watches it, releases the team's hold the
chain held, clears the marker once production is back, and leaves a receipt in the chain ledger whatever
happened (custody/chain_receipts.py).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from fairwin.custody.chain import (
    ChainAborted,
    Marker,
    chained_order,
    continuation_problems,
    marker_path,
    read_marker,
)
from fairwin.custody.chain_receipts import last_end, ledger_path, write_end
from fairwin.custody.hardware_lock import holding
from fairwin.custody.hold import Hold
from fairwin.custody.slurm_chain import held_by_slurm
from fairwin.custody.slurm_job import end_hold
from fairwin.custody.team_hold import TeamHold
from fairwin.directory.environment import git_state
from fairwin.directory.journal import RELEASE_STEP
from fairwin.directory.layout import WindowDir
from fairwin.directory.status import TeamRelease
from fairwin.errors import GateRefused, InputError, RestoreFailed
from fairwin.plan.site import Site
from fairwin.production.control import Production
from fairwin.production.placeholder_record import RunningPlaceholder
from fairwin.production.placeholders import Placeholders, not_running
from fairwin.rules.registry import get_rule


async def abort_between_windows(
    site: Site, output_dir: Path, say: Callable[[str], None], reason: str
) -> ChainAborted | None:
    """:func:`abort_chain` from outside a window (``fairwin chain abort``, ``check-prev``): the hardware held as a
    window holds it, so that a chained window running now refuses it, named (exit 4), and none starts meanwhile."""
    marker = marker_path(site, output_dir)
    if read_marker(marker) is None:
        return None
    with holding(site, output_dir, "chain-abort", marker):
        return await abort_chain(site, output_dir, say, reason)


async def abort_chain(site: Site, output_dir: Path, say: Callable[[str], None], reason: str) -> ChainAborted | None:
    """``fairwin chain abort``: placeholders down, production restored and watched, the marker cleared (only once
    the watch held: a failed restore raises RestoreFailed and keeps the marker). None when no chain is marked.
    Either way the chain's end is a receipt in the ledger (``reason``: why it was aborted)."""
    path = marker_path(site, output_dir)
    marker = read_marker(path)
    if marker is None:
        return None
    production = Production(site, output_dir)
    placeholders = Placeholders(site, Path(marker.placeholder_dir), hold_job=marker.slurm_job)
    stopped = await placeholders.stop_all(marker.placeholders)
    hold = Hold(production, [], say, taken=True, window_job=await _let_go(marker, say))
    team: TeamRelease | None = None
    try:
        restored = await hold.give_back()
        team = await _release_chains_hold(site, marker)  # after the restore, as a window's own release
    finally:  # the restore's proof, failed or not, with the chain's end
        write_end(output_dir, marker.aborted(reason, hold.restored, stopped, team_release=team))
    path.unlink(missing_ok=True)
    notes = []
    if marker.production.sha256 != production.snapshot().sha256:
        notes.append("production was restored as the plan declares it now, which differs from the chain's snapshot")
    return ChainAborted(
        chain_id=marker.chain_id,
        windows=[w.window_id for w in marker.windows],
        placeholders=stopped,
        restore=restored,
        notes=notes,
    )


async def _let_go(marker: Marker, say: Callable[[str], None]) -> str | None:
    """Where a Slurm job holds the chain's nodes: from inside it (a window refused before it opened), that job,
    for production to be handed back to Slurm when it ends (`fairwin submit`'s follow ends it); from outside, the
    job ended first, so that production can be proved back now."""
    if marker.slurm_job is None:
        return None
    if os.environ.get("SLURM_JOB_ID") == marker.slurm_job:
        return marker.slurm_job
    await end_hold(marker.slurm_job, say)
    return None


async def _release_chains_hold(site: Site, marker: Marker) -> TeamRelease | None:
    """The team's hold the chain held ([custody]), released as the window that took it would have: its outcome kept
    in that window's status too, so that one that fails stays owed there for `fairwin recover`."""
    taker = marker.team_hold
    if taker is None or not site.plan.custody.release_command:
        return None
    window = WindowDir(path=Path(taker.window_path), window_id=taker.window_id)
    team = TeamHold(site, taker.window_id, window.path, held=True)
    window.journal_event(RELEASE_STEP, "begin")
    record = await team.release()
    window.journal_event(RELEASE_STEP, "end", **record.model_dump(mode="json"))
    released = team.state()
    with contextlib.suppress(InputError, OSError):  # its receipt is the ledger's either way
        window.amend_status(team_release=released)
    return released


async def describe(site: Site, output_dir: Path) -> list[str]:
    """``fairwin chain status``: where the chain stands, one line per fact."""
    path = marker_path(site, output_dir)
    marker = read_marker(path)
    if marker is None:
        ended = last_end(output_dir)
        said = f"no chain in progress ({path} is absent)"
        if ended is None:
            return [said]
        restore = ended.restore.state if ended.restore is not None else "not owed"
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ended.time))
        decided = f", decision {ended.decision}" if ended.decision else ""
        return [
            said,
            f"last chain end: {ended.chain_id} {ended.end}{decided} at {when}; production {restore}"
            + (f"; {ended.reason}" if ended.reason else "")
            + f" ({ledger_path(output_dir)})",
        ]
    rule = get_rule(site.plan.window.rule)
    lines = [
        f"CHAINED: {marker.chain_id}, {len(marker.windows)} window(s), production left down since "
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(marker.time))} by {marker.last.window_id} "
        f"(coordinator {marker.coordinator}, commit {(marker.commit or 'none')[:12]})",
        *(f"  {w.window_id}: {w.mode}, {w.order}" for w in marker.windows),
    ]
    dead = await not_running(site, marker.placeholders)
    names = ", ".join(_placeholder(p) for p in marker.placeholders) or "none declared"
    lines.append(f"placeholders: {names}; " + ("; ".join(dead) if dead else "all running"))
    lines.append(f"next window's order: {chained_order(rule, marker) or 'drawn (the rule fixes or draws it)'}")
    return lines


def _placeholder(record: RunningPlaceholder) -> str:
    where = f" on host {record.host}, tmux session {record.session}" if record.host else ""
    return f"{record.name} (pid {record.pid}{where})"


async def check_previous(site: Site, output_dir: Path, capture: Path | None, say: Callable[[str], None]) -> str:
    """``fairwin chain check-prev``: the gate before the next window. Any refusal while the marker is present
    aborts the chain (production restored) and is raised as GateRefused (exit 4) with what was done."""
    marker = read_marker(marker_path(site, output_dir))
    if marker is None:
        return "no chain in progress: nothing to check"
    snapshot = Production(site, output_dir).snapshot()
    commit = git_state(site.base_dir).commit
    problems = await continuation_problems(site, marker, snapshot=snapshot, commit=commit, capture=capture)
    problems += held_by_slurm(marker)
    if not problems:
        return f"OK: {marker.chain_id} may continue after {marker.last.window_id}"
    why = f"the chain cannot continue: {'; '.join(problems)}"
    try:
        aborted = await abort_between_windows(site, output_dir, say, why)
    except RestoreFailed as exc:
        raise GateRefused(why, aftermath=f"chain ABORTED, decision REJECT; {exc}") from None
    state = aborted.restore.state if aborted else "not owed"
    raise GateRefused(why, aftermath=f"chain ABORTED, decision REJECT; production {state}")
