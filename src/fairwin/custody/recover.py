"""``fairwin recover PLAN``: finish what a window owed after fairwin itself died (kill -9, OOM, a lost session).

The plan's lock names the unfinished window. Its journal says what was started: every
server launched (``launched`` events, with pid and argv; a ``launching`` without one is
matched by its command line) and whether production was taken down. Recovery stops
every such server still running (its process group, SIGTERM then SIGKILL), removes
every container labelled with the window on each engine the plan's containers use, gives
production back and watches it when the window had taken it (as production was
declared when the window opened: the window's copy of the plan, checked against the
snapshot journaled at open; any difference is reported), marks the window
``interrupted`` with the recovery recorded, and removes the lock. Run twice, the second
run finds no lock and does nothing.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from fairwin.archive import open_archive
from fairwin.archive.window_rows import archive_location
from fairwin.custody.chain import Marker, marker_path, read_marker
from fairwin.custody.chain_receipts import write_end
from fairwin.custody.hardware_lock import HardwareLock
from fairwin.custody.hold import Hold
from fairwin.custody.lock import holder, lock_path, shared_locks
from fairwin.custody.slurm_return import end_ended_chains, prove_returns
from fairwin.custody.team_hold import TeamHold, release_owed
from fairwin.directory.journal import RELEASE_STEP, Launched, happened, production_at_open, read_journal, servers
from fairwin.directory.layout import WindowDir
from fairwin.directory.status import RecoveryRecord, Restore, TeamRelease, WindowStatus
from fairwin.errors import ArchiveError, InputError, LaunchError, RestoreFailed
from fairwin.launch.remote_runs import stop_runs
from fairwin.launch.runtime_cli import container_clis
from fairwin.launch.spec import WINDOW_LABEL, make_spec, worker_specs
from fairwin.plan.loading import LoadedPlan, parse_window_plan
from fairwin.plan.site import Site
from fairwin.production.control import Production
from fairwin.production.placeholders import Placeholders
from fairwin.production.proof import stop_group
from fairwin.records import read_record
from fairwin.redaction import argv_matches, scrub_file

STOP_GRACE_S = 10.0


@dataclass
class Recovery:
    window_id: str | None
    stopped: list[str] = field(default_factory=list)
    production: Restore | None = None
    problems: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)  # finished windows whose owed team release now released
    owed: list[str] = field(default_factory=list)  # windows whose team release is still owed after this recover
    returned: list[tuple[str, Restore]] = field(default_factory=list)  # windows production came back to from Slurm
    holds_ended: list[str] = field(default_factory=list)  # hold jobs of ended chains, cancelled

    def summary(self) -> str:
        releases = [f"team release of window {window} released" for window in self.released]
        releases += [f"window {window}: production {restore.state} from Slurm" for window, restore in self.returned]
        releases += [f"Slurm job {job}, the hold job of a chain that ended, cancelled" for job in self.holds_ended]
        if self.window_id is None:
            if releases or self.problems:
                return "; ".join([*releases, *self.problems])
            return "nothing to recover: no window holds the lock, and no team release is owed"
        parts = [f"recovered window {self.window_id}: stopped {len(self.stopped)} server process(es)"]
        if self.production is not None:
            parts.append(f"production {self.production.state}")
        parts += releases + self.problems
        return "; ".join(parts)


def _matching(pid: int | None, argv: list[str]) -> list[psutil.Process]:
    """The recorded process if it still runs that command; else any process running exactly that command."""
    candidates = [psutil.Process(pid)] if pid is not None and psutil.pid_exists(pid) else list(psutil.process_iter())
    found = []
    for process in candidates:
        with contextlib.suppress(psutil.Error):
            if argv_matches(argv, process.cmdline()[-len(argv) :]) and process.pid != os.getpid():
                found.append(process)
    return found


async def _stop(process: psutil.Process) -> str:
    try:
        group = os.getpgid(process.pid)
    except ProcessLookupError:
        return f"pid {process.pid} (gone before it was signalled)"
    await stop_group(group, process.pid, STOP_GRACE_S)
    return f"pid {process.pid} (group {group})"


async def recover(loaded: LoadedPlan, output_dir: Path) -> Recovery:
    """The window whose fairwin died (named by the lock), then every team release still owed in ``output_dir``."""
    site = Site.of(loaded)  # every role: a dead window's mode is not trusted to say what it left running
    lock = lock_path(site, output_dir)
    held = holder(lock)
    if held is None:
        result = Recovery(window_id=None)
        await _owed_releases(site, output_dir, result)
        await _owed_returns(site, output_dir, result)
        return result
    if held.alive:
        raise InputError(f"{held.describe()} is still running; recover only a window whose fairwin died ({lock})")
    directory = WindowDir(path=held.window_path, window_id=held.record.window_id)
    events, problems = read_journal(directory.journal)
    result = Recovery(window_id=directory.window_id, problems=problems)
    directory.journal_event("recover", "begin", lock=held.record.stored())
    result.stopped += await _remove_containers(site, directory.window_id, servers(events), result.problems)
    for server in servers(events):
        if server.container is not None:
            continue
        if server.host is not None:
            result.stopped += await _stop_remote(site, server, result.problems)
            continue
        for process in _matching(server.pid, server.argv):
            result.stopped.append(await _stop(process))
    result.stopped += await _stop_runs(site, directory.window_id, result.problems)
    _scrub_logs(site, directory, result.problems)
    chain = read_marker(marker_path(site, output_dir)) if site.plan.production is not None else None
    if chain is not None or (happened(events, "production down", "begin") and not happened(events, "restore", "end")):
        production = _production_at_open(site, directory, production_at_open(events), output_dir, result.problems)
        if production is not None:
            await _give_back(production, site, output_dir, chain, result)
    team = await _release_team_hold(site, directory, result.problems, result.owed) if release_owed(events) else None
    restore = result.production.model_dump(mode="json") if result.production is not None else None
    state = _state(directory)
    if state == "running":
        directory.set_status(
            "interrupted",
            error="fairwin died during the window; recovered by `fairwin recover`",
            recovery=RecoveryRecord(stopped=result.stopped, restore=result.production),
            **({"team_release": team} if team is not None else {}),
        )
    directory.journal_event("recover", "end", stopped=result.stopped, restore=restore)
    _release_hardware(site, output_dir, lock, directory.window_id, result.problems)
    await _owed_releases(site, output_dir, result, skip=directory.window_id)
    await _owed_returns(site, output_dir, result)
    if result.production is not None and not result.production.restored:
        raise RestoreFailed(f"recovered window {directory.window_id}, but RESTORE FAILED: {result.production.reason}")
    return result


def _plan_at_open(site: Site, directory: WindowDir, notes: list[str]) -> Site:
    """The site as the window ran it (its plan's copy, with its overrides); as the plan is now where it cannot be
    read."""
    try:  # the same place: env files resolve as they did
        return Site.at(parse_window_plan(directory), site.path)
    except InputError as exc:
        notes.append(f"the window's plan copy could not be read ({exc}); recovered as the plan says now")
        return site


async def _release_team_hold(
    site: Site, directory: WindowDir, problems: list[str], owed: list[str], attempts: int = 1
) -> TeamRelease | None:
    """The team's release ([custody]) as the window's plan declared it, after production is back; journaled.
    What status.json keeps of it (``attempts``: this one included)."""
    team = TeamHold(_plan_at_open(site, directory, problems), directory.window_id, directory.path, held=True)
    directory.journal_event(RELEASE_STEP, "begin")
    record = await team.release()
    directory.journal_event(RELEASE_STEP, "end", **record.model_dump(mode="json"))
    if not record.released:
        owed.append(directory.window_id)
        problems.append(
            f"window {directory.window_id}: {record.error}; still owed: release it by hand, or run `fairwin recover` "
            "again"
        )
    return team.state(attempts)


async def _owed_releases(site: Site, output_dir: Path, result: Recovery, skip: str | None = None) -> None:
    """Every window in ``output_dir`` whose status says its team release did not release: run again, and its
    status rewritten with the outcome (the rest of it as it was)."""
    for path in sorted(output_dir.glob("*/status.json")) if output_dir.is_dir() else []:
        try:
            status = read_record(path, WindowStatus)
        except InputError:
            continue  # an unreadable status is `fairwin decide`'s to report, not a debt to guess at
        owed = status.team_release
        if owed is None or owed.released or status.window_id == skip:
            continue
        directory = WindowDir(path=path.parent, window_id=status.window_id)
        team = await _release_team_hold(site, directory, result.problems, result.owed, owed.attempts + 1)
        assert team is not None  # a release was tried just now
        directory.amend_status(team_release=team)
        if team.released:
            result.released.append(status.window_id)


async def _owed_returns(site: Site, output_dir: Path, result: Recovery) -> None:
    """Every window of ``output_dir`` that handed production to Slurm (RETURNING): its return proved now; one
    that did not come back is RESTORE FAILED, raised once the rest is done. On a cluster, then, the hold job of
    every chain that ended ended too."""
    result.returned += await prove_returns(site, output_dir, lambda _line: None)
    if site.plan.cluster is not None:
        chain = read_marker(marker_path(site, output_dir))
        held = chain.slurm_job if chain is not None else None
        result.holds_ended += await end_ended_chains(output_dir, held, lambda _line: None)
    failed = [f"window {window}: {restore.reason}" for window, restore in result.returned if not restore.restored]
    if failed:
        raise RestoreFailed(f"production did not come back from Slurm: RESTORE FAILED: {'; '.join(failed)}")


async def _remove_containers(site: Site, window_id: str, launched: list[Launched], problems: list[str]) -> list[str]:
    """Every container labelled with the window, on every engine the plan's containers use (here and on its
    hosts), stopped and removed (through the host it was journaled on, where that host's engine lists it). An
    engine that cannot be asked is named as a problem; a journaled container no engine has was removed already."""
    journaled = {s.container: s.host for s in launched if s.container is not None}
    clis = container_clis(site)
    removed: list[str] = []
    handled: set[str] = set()
    for cli in clis:
        try:
            listed = await cli.labelled(f"{WINDOW_LABEL}={window_id}", running_only=False)
        except LaunchError as exc:
            problems.append(f"the containers{cli.where} could not be listed: {exc}")
            continue
        for name in (n for n in listed if n not in handled):
            owner = next((c for c in clis if name in journaled and c.host_name == journaled[name]), cli)
            removed += await owner.remove([name], STOP_GRACE_S)
            handled.add(name)
    return removed


def _scrub_logs(site: Site, directory: WindowDir, problems: list[str]) -> None:
    """The servers fairwin died beside wrote their logs themselves, and one may have printed a secret it was
    launched with: each role's secrets are resolved again (into memory) and the window's logs scrubbed of them."""
    plan = site.plan
    for name in plan.roles:
        try:  # making a role's specs remembers what its secret positions resolve to
            worker_specs(make_spec(name, plan.roles, site.base_dir), plan.roles, site.base_dir)  # secrets, not hosts
        except InputError as exc:
            problems.append(f"the logs could not be scrubbed of role {name}'s secrets ({exc})")
    for log in sorted(directory.path.rglob("*.log")):
        scrub_file(log)


async def _stop_runs(site: Site, window_id: str, problems: list[str]) -> list[str]:
    """What the window still runs on any host of the plan's roles, found by its run directories there (a server
    whose launch was cut before its pid was journaled too), stopped and its directories removed."""
    stopped: list[str] = []
    for name, host in site.remote.items():
        try:
            stopped += await stop_runs(name, host, window_id, STOP_GRACE_S)
        except (LaunchError, InputError) as exc:
            problems.append(f"the servers left on host {name} could not be stopped: {exc}")
    return stopped


async def _stop_remote(site: Site, server: Launched, problems: list[str]) -> list[str]:
    """A server on a remote host: its process group stopped over SSH (only one whose pid was journaled)."""
    from fairwin.launch.ssh import connect, stop_remote_group  # asyncssh only where hosts are used

    host = site.hosts.get(server.host or "")
    if host is None or server.pid is None:
        why = "the plan no longer declares the host" if host is None else "its pid was never journaled"
        problems.append(f"a server on host {server.host} could not be stopped: {why}")
        return []
    try:
        conn = await connect(str(server.host), host)
    except (LaunchError, InputError) as exc:  # an unset passphrase_env too: production is still given back
        problems.append(f"could not reach host {server.host} to stop pid {server.pid}: {exc}")
        return []
    group = server.group or server.pid  # a detached server's group is its wrapper's (launch/remote.py)
    try:
        sent = await stop_remote_group(conn, group, STOP_GRACE_S)
    finally:
        conn.close()
    return [] if sent == "none" else [f"pid {server.pid} on host {server.host} ({sent})"]


async def _give_back(
    production: Production, site: Site, output_dir: Path, chain: Marker | None, result: Recovery
) -> None:
    """Production restored and watched, after any placeholder still holding the hardware is taken down. A chain
    in progress is aborted (fairwin died inside one of its windows): its marker goes once production is back."""
    hold_job = chain.slurm_job if chain is not None else None
    placeholders = Placeholders(site, production.state_dir, hold_job=hold_job)  # a chained window may have started some
    listed = chain.placeholders if chain is not None else []
    listed_names = [p.name for p in listed]
    result.stopped += [line for line in await placeholders.stop_all(listed) if not line.endswith("already gone")]
    hold = Hold(production, [], lambda _line: None, taken=True)
    try:
        await hold.give_back()
    except RestoreFailed:
        return
    finally:
        result.production = hold.restored
        if chain is not None:  # the chain's end, with the restore's proof, whatever it was
            why = "fairwin died inside a chained window; aborted by `fairwin recover`"
            write_end(output_dir, chain.aborted(why, hold.restored, listed_names, window_id=result.window_id))
    if chain is not None:
        marker_path(site, output_dir).unlink(missing_ok=True)
        result.problems.append(f"chain {chain.chain_id} ABORTED (decision REJECT), its marker cleared")


def _production_at_open(
    site: Site, directory: WindowDir, recorded: str | None, output_dir: Path, notes: list[str]
) -> Production | None:
    """Production as declared when the window opened: from the window's copy of the plan, checked against
    the snapshot journaled at open (``recorded``, its sha256). The plan as it is now stands in only when that
    copy cannot be read."""
    at_open = _plan_at_open(site, directory, notes)
    if at_open.plan.production is None:
        notes.append("the plan declared no [production] when the window opened; nothing to restore")
        return None
    production = Production(at_open, output_dir)
    try:
        now = production.snapshot().sha256
        if recorded is not None and recorded != now:
            notes.append(
                f"production's declaration differs from the snapshot taken at open ({recorded[:12]} then, "
                f"{now[:12]} now: an env file changed?); restored as declared now"
            )
        if site.plan.production is not None and Production(site, output_dir).snapshot().sha256 != now:
            notes.append("the plan's [production] changed since the window opened; restored as it was at open")
    except (InputError, OSError) as exc:  # the restore itself says whether production can still be launched
        notes.append(f"production's snapshot could not be compared with the one taken at open: {exc}")
    return production


def _state(directory: WindowDir) -> str | None:
    """The window's recorded state; None when its status cannot be read (recovery goes on regardless)."""
    try:
        return read_record(directory.status, WindowStatus).state
    except InputError:
        return None


def _release_hardware(site: Site, output_dir: Path, lock: Path, window_id: str, problems: list[str]) -> None:
    """Every lock the dead window holds (its shared ones too, so that other coordinators may take the hardware)."""
    try:
        stores = shared_locks(site, open_archive(archive_location(site, output_dir)))
    except ArchiveError as exc:  # its lock file goes all the same, as when a store cannot release
        problems.append(f"the hardware's shared lock was not released: {exc}; run recover again")
        stores = []
    problems += [f"{problem}; run recover again" for problem in HardwareLock(lock, stores, []).release(window_id)]
