"""A window's admission as one ordered list of named checks (:data:`ADMISSION`), each with what it observes.

Three stages, in order. ``plan``: what the plan and the receipts given say, which ``fairwin plan
check`` runs too; ``window``: the state of the world a window would meet here (its locks, the
control archive, a chain in progress), contacting no host; ``hosts``: each host answering, its
code, commands and ports, its GPUs and clocks, and production as it runs. A check returns the
problems it found, and the first one to find any refuses (exit 4) naming itself; a check that
cannot observe what it needs fails closed in the same way. What a check observes is kept on the
:class:`~fairwin.window.admitted.Admission` for the window.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shlex
import shutil
from pathlib import Path
from typing import Literal

from fairwin.custody.chain import continuation_problems, in_progress
from fairwin.custody.lock import HardwareLocks, MachineLocks, refuse_if_held, refuse_if_held_elsewhere
from fairwin.custody.slurm import allocated, production_outlives_job
from fairwin.custody.slurm_chain import held_by_slurm, runs_in_chain_job
from fairwin.directory.environment import git_state
from fairwin.errors import ArchiveError, InputError, LaunchError, RuntimeCheckError
from fairwin.gates.refusal import Check, Problems
from fairwin.gates.sequence import GATES, GateReading
from fairwin.launch.checkouts import check_checkouts, pinned_checkouts
from fairwin.launch.listeners import held_here
from fairwin.launch.shell import shell
from fairwin.plan.hosts import SlurmNode
from fairwin.production.live_check import production_as_it_runs
from fairwin.production.proof import host_port
from fairwin.telemetry import watchdog
from fairwin.telemetry.cap import production_cap
from fairwin.telemetry.watched_hosts import declares_clocks, find_source, host_sources, unread_gpus, unwatched_clocks
from fairwin.window.admitted import Admission
from fairwin.window.processes import unlaunchable

Stage = Literal["plan", "window", "hosts"]
RUNTIME = "each role's derived environment, speculative config, CPUs and key; the rule's counters"


def _runtime_declarations(admitting: Admission) -> Problems:
    admitting.checked  # noqa: B018  # the preflight refuses (naming this check) or raises a PlanError itself
    return []


def _window_lock(admitting: Admission) -> Problems:
    refuse_if_held(admitting.lock)  # HardwareHeld (exit 4) names the window holding it, and what to do
    return []


def _control_archive(admitting: Admission) -> Problems:
    try:
        admitting.snapshot  # noqa: B018  # read once, here: every count of the window uses these rows
    except ArchiveError as exc:  # no fairwin schema, a newer one, or unreachable
        return [f"the control archive: {exc}"]
    return []


def _hardware(admitting: Admission) -> Problems:
    """Another window on this machine's hardware (any output directory, any plan), or a second coordinator
    sharing the archive: HardwareHeld names it."""
    here: list[HardwareLocks] = [MachineLocks.here()]
    archive = admitting.archive
    refuse_if_held_elsewhere([*here, archive] if isinstance(archive, HardwareLocks) else here, admitting.site.lock_keys)
    return []


def _cluster_allocation(admitting: Admission) -> Problems:
    """With [cluster] scheduler = "slurm", Slurm holds the hardware: the window runs inside an exclusive allocation
    of every node the plan declares; a production it launches on its node must be able to outlive the job."""
    cluster = admitting.site.plan.cluster
    if cluster is None:
        return []
    admitting.allocation, bound, problems = allocated(cluster, os.environ)
    admitting.site = admitting.site.bound(bound)  # the plan's hosts on the cluster: every later check sees them
    role = admitting.site.plan.production.role if admitting.site.plan.production is not None else None
    launched_here = role is not None and admitting.site.production_host is None  # by a window of the job, at restore
    if not problems and admitting.allocation is not None and launched_here:
        problems += production_outlives_job(str(role), admitting.allocation.job_id)
    return problems


def _chain(admitting: Admission) -> Problems:
    """A chain in progress is continued only by a chained window; chaining needs production and a mode that
    chains."""
    site, wanted = admitting.site, admitting.options.chain
    path, found = admitting.chain_marker
    if wanted is None:
        how = "run with --chain or --chain-last, or end it with `fairwin chain abort PLAN`"
        return [f"{in_progress(path, found)}; {how}"] if found is not None else []
    if site.plan.production is None:
        raise InputError(f"--chain needs a [production] section in {site.path}: a chain leaves production down")
    if site.plan.cluster is not None and not os.environ.get("SLURM_STEP_ID", "").isdigit():
        # Between two windows' jobs Slurm would give the freed nodes to another job (production's own, where it is
        # one): a chain needs one allocation held from its first window to its last, each window a step of it.
        job = site.plan.production.slurm_job
        held = f"with production as a Slurm job ({job})" if job else "on a Slurm cluster"
        between = "Slurm runs production between them" if job else "Slurm gives its nodes to other jobs between them"
        raise InputError(
            f"--chain {held} runs each window as a step of one allocation held across the chain, else {between}: "
            "`fairwin submit PLAN --chain` holds one"
        )
    if admitting.checked.mode.many:
        # Its last start is known only when a look drops the last open candidate: the placeholders that must take
        # the hardware before that start's servers stop could not be started in time.
        raise InputError(
            f"mode {admitting.mode_name} is a many-arm window, which does not chain: run it without --chain, "
            "before or after the chain"
        )
    if not admitting.checked.mode.chain:
        raise InputError(
            f"mode {admitting.mode_name} never chains (chain = false): its windows need the restore "
            "and the watch; run it without --chain"
        )
    if wanted == "last" and found is None:
        raise InputError(f"--chain-last: no chain is in progress ({path}); run the window without it")
    return []


def _placeholders(admitting: Admission) -> Problems:
    """Every placeholder here: its command exists and its port is free (the chained close starts them, after the
    measurement; found missing then, production would be left bare)."""
    chain = admitting.site.plan.chain
    if admitting.options.chain != "chain" or chain is None:
        return []
    problems = []
    for name, placeholder in chain.placeholders.items():
        if placeholder.host is not None:
            continue  # checked on its host once the hosts answered
        command = placeholder.argv[0]
        found = shutil.which(command, path=None) if "/" not in command else admitting.site.resolve(Path(command))
        if found is None or not os.access(found, os.X_OK):
            problems.append(f"placeholder {name}: {command} is not a command fairwin can run here; fix")
        elif placeholder.port is not None and (holder := held_here(placeholder.port)) is not None:
            problems.append(
                f"placeholder {name}: its port {placeholder.port} here is already held by {holder}; stop it, or "
                "give the placeholder another port in"
            )
    return [f"{p} [chain.placeholders] before a chained window leaves production down for it" for p in problems]


def _gate(check: Check[GateReading]) -> Check[Admission]:
    """One of the gates (gates/sequence.py), read from what the admission gives it."""
    return Check(check.name, check.observes, lambda admitting: check.find(admitting.gates))


async def _hosts_reachable(admitting: Admission) -> Problems:
    if not admitting.site.remote:
        return []
    from fairwin.launch.ssh import unreachable  # asyncssh only where hosts are used

    return await unreachable(admitting.site.remote)


async def _pinned_code(admitting: Admission) -> Problems:
    """Every pinned checkout at its commit and clean on its own host (each start checks its own again)."""
    try:
        admitting.checkouts = await check_checkouts(pinned_checkouts(admitting.site))
    except RuntimeCheckError as exc:
        return [f"pinned code: {exc}"]
    return []


async def _launchable(admitting: Admission) -> Problems:
    production = admitting.production
    held = (admitting.site.production_host, host_port(production.base_url)[1]) if production is not None else None
    problems = await unlaunchable(admitting.site, held)
    return [f"before production is taken down: {'; '.join(problems)}"] if problems else []


async def _placeholders_there(admitting: Admission) -> Problems:
    """Every placeholder on a host finds its command there, and tmux on an SSH host (one on a Slurm node runs as a
    step)."""
    chain = admitting.site.plan.chain
    if admitting.options.chain != "chain" or chain is None:
        return []
    problems = []
    for name, placeholder in chain.placeholders.items():
        if placeholder.host is None:
            continue
        command, place = shlex.quote(placeholder.argv[0]), admitting.site.places.get(placeholder.host)
        if place is None:
            problems.append(f"placeholder {name}: its host {placeholder.host} is bound to no node of a Slurm job")
            continue
        script = f"command -v -- {command} >/dev/null || echo {command}"
        script = script if isinstance(place, SlurmNode) else f"command -v tmux >/dev/null || echo tmux; {script}"
        try:
            _, out = await shell(placeholder.host, place, script, retry="read")
        except LaunchError as exc:
            problems.append(f"placeholder {name}: {exc}")
            continue
        if missing := out.split():
            problems.append(
                f"placeholder {name}: {' and '.join(missing)} not found on host {placeholder.host}; install it or fix "
                "[chain.placeholders] before a chained window leaves production down for it"
            )
    return problems


async def _production_cap(admitting: Admission) -> Problems:
    """Production's cap read where it is kept (on its host, once the hosts answered; an unreadable file is an
    InputError), and the archive counted again with it where the gates could only assume it: the first look the
    gate line promises is the one the window's looks will take, on the same rows."""
    admitting.production_cap = await asyncio.to_thread(production_cap, admitting.site)
    admitting.archive_starts_read = admitting.first_look(admitting.production_cap[0])
    return []


def _accepted(admitting: Admission, what: str) -> bool:
    """The plan declares no GPU (a CPU-only plan goes on, its decision naming what went unseen), or it accepts
    ``what`` unobserved."""
    plan = admitting.site.plan
    return not declares_clocks(plan) or what in plan.runtime.accept_unobserved


async def _clocks_observed(admitting: Admission) -> Problems:
    here = find_source(admitting.site.plan.telemetry.gpu)
    admitting.sources = await asyncio.to_thread(host_sources, admitting.site, here)
    unseen = unwatched_clocks(admitting.site.plan, admitting.sources)
    admitting.clocks = dataclasses.replace(admitting.clocks, here=here, unwatched=tuple(unseen))
    if not unseen or _accepted(admitting, "clocks"):
        return []
    return [
        f"the clocks cannot be observed ({'; '.join(unseen)}), and the plan declares production's clock cap: "
        "a window off that cap or dialled back would pass unseen; give each host a GPU source (nvidia-smi), or "
        "set telemetry.cap_from = 'log' with telemetry.watchdog_logs, or add \"clocks\" to "
        "runtime.accept_unobserved to decide without them"
    ]


async def _watchdog_logs(admitting: Admission) -> Problems:
    """Each watchdog log's size, marked before the take-down; a log that cannot be read is never a quiet one."""
    marks, unread = await watchdog.mark(admitting.site)
    admitting.clocks = dataclasses.replace(admitting.clocks, watchdog_marks=marks)
    return unread


def _gpus_readable(admitting: Admission) -> Problems:
    """The runbook's "both hosts proved quiet" would pass with nothing looked at."""
    unread = unread_gpus(admitting.sources)
    admitting.clocks = dataclasses.replace(admitting.clocks, gpus_unread=tuple(unread))
    if not unread or _accepted(admitting, "gpus"):
        return []
    return [
        f"the quiet proof cannot read the GPUs of {', '.join(f'host {h}' for h in unread)} (no GPU source "
        "there), and the plan declares production's clock cap: a job computing on them would pass unseen; give "
        'each host nvidia-smi, or add "gpus" to runtime.accept_unobserved to prove them quiet without it'
    ]


async def _production_as_it_runs(admitting: Admission) -> Problems:
    if admitting.production is None:
        return []
    admitting.live, problems = await production_as_it_runs(admitting.site, admitting.production, admitting.options.say)
    return problems


async def _chain_continues(admitting: Admission) -> Problems:
    """A chain in progress continues only with production declared as it left it, the commit it was for, its
    last window complete and its placeholders running."""
    found = admitting.chain_marker[1]
    if admitting.options.chain is None or found is None or admitting.production is None:
        return []
    problems = await continuation_problems(
        admitting.site,
        found,
        snapshot=admitting.production.snapshot(),
        commit=git_state(admitting.site.base_dir).commit,
        capture=admitting.options.chain_production,
    )
    problems += held_by_slurm(found) + runs_in_chain_job(
        found, admitting.allocation.job_id if admitting.allocation else None
    )
    return [f"the chain cannot continue: {'; '.join(problems)}"] if problems else []


#: Every check a window passes before production is touched, in order, with its stage.
ADMISSION: tuple[tuple[Stage, Check[Admission]], ...] = (
    ("plan", Check("runtime declarations", RUNTIME, _runtime_declarations)),
    ("window", Check("window lock", "the output directory's lock file", _window_lock)),
    ("window", Check("control archive", "the control archive, read once", _control_archive)),
    (
        "window",
        Check("cluster allocation", "the Slurm job the window runs in, and its nodes ([cluster])", _cluster_allocation),
    ),
    ("window", Check("hardware", "this machine's locks and the shared ones on every host touched", _hardware)),
    ("window", Check("chain", "a chain in progress against --chain and --chain-last", _chain)),
    ("window", Check("placeholders", "each placeholder's command and port here (--chain)", _placeholders)),
    *(("window" if check.name == "required gates" else "plan", _gate(check)) for check in GATES),
    ("hosts", Check("hosts reachable", "each host the window touches, by its known key", _hosts_reachable)),
    ("hosts", Check("pinned code", "each pinned checkout on its host", _pinned_code)),
    ("hosts", Check("launchable", "each process's command, directory and fixed ports on its host", _launchable)),
    ("hosts", Check("placeholders there", "each placeholder's command on its host, and tmux", _placeholders_there)),
    ("hosts", Check("production's clock cap", "the cap file on production's host", _production_cap)),
    ("hosts", Check("clocks observed", "each host's GPU source and clock settings", _clocks_observed)),
    ("hosts", Check("watchdog logs", "each host's clock watchdog log", _watchdog_logs)),
    ("hosts", Check("GPUs readable", "each host's GPU source, for the quiet proof", _gpus_readable)),
    (
        "hosts",
        Check(
            "production as it runs", "production's live processes against each compared role", _production_as_it_runs
        ),
    ),
    (
        "hosts",
        Check("chain continues", "production, the commit and the placeholders against the chain", _chain_continues),
    ),
)


def checks(*stages: Stage) -> list[Check[Admission]]:
    """The checks of these stages, in the list's order."""
    return [check for stage, check in ADMISSION if stage in stages]
