"""The cluster's commands (docs/cluster.md): `fairwin submit PLAN`, a window as a Slurm job on the plan's [cluster],
followed to its end; `fairwin status WINDOW`, where a window stands, its job's state included; `fairwin campaign
DIR...`, the windows of several plans run at once, listed and written as one page."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from fairwin.cli import _console
from fairwin.cli._arguments import chain_arguments, plan_argument, window_arguments
from fairwin.errors import InputError, Interrupted, PlanError, RestoreFailed

if TYPE_CHECKING:
    from fairwin.cli._arguments import Commands
    from fairwin.custody.slurm_job import JobRequest
    from fairwin.plan.models import Plan
    from fairwin.plan.site import Site
    from fairwin.production.scheduled import ScheduledProduction

INTERRUPTED = Interrupted.exit_code


def add_parsers(commands: Commands) -> None:
    submit = commands.add_parser(
        "submit", help="run one window as a Slurm job on the plan's [cluster]: its nodes alone, then follow it"
    )
    plan_argument(submit)
    window_arguments(submit)
    submit.add_argument("--no-follow", action="store_true", help="print the job id and return at once")
    chain_arguments(submit)
    submit.add_argument(
        "--hold-minutes",
        type=int,
        metavar="MIN",
        help="a new chain with production as a Slurm job: how long its hold job keeps the nodes "
        "(default: three of the first window's limits)",
    )
    submit.set_defaults(func=submit_window)
    status = commands.add_parser(
        "status", help="where a window stands: its state, production's custody, and its Slurm job's state now"
    )
    status.add_argument("window", help="a window's directory")
    status.set_defaults(func=window_status)
    campaign = commands.add_parser(
        "campaign", help="the windows of several plans run at once: their jobs, states and verdicts, and one page"
    )
    campaign.add_argument("directories", nargs="+", help="the output directories the plans' windows are in")
    campaign.add_argument(
        "--archive", help="the shared control archive (a JSONL path or postgresql:// URL; default $FAIRWIN_ARCHIVE_URL)"
    )
    campaign.add_argument("--html", help="the page to write (default: campaign.html in the first directory)")
    campaign.set_defaults(func=campaign_page)


def campaign_page(args: argparse.Namespace) -> int:
    from fairwin.archive import ARCHIVE_ENV, open_archive
    from fairwin.custody.slurm_job import job_now
    from fairwin.verdict.campaign import gather
    from fairwin.verdict.campaign_page import write_campaign

    location = args.archive or os.environ.get(ARCHIVE_ENV)
    store = open_archive(location) if location else None
    if store is not None and not store.exists():
        raise InputError(f"{store.location}: no archive there; name the plans' shared archive with --archive")
    snapshot = store.snapshot() if store is not None else None
    found = gather([Path(d) for d in args.directories], snapshot)
    jobs = {w.job: job_now(w.job) for w in found.windows if w.job is not None}
    for w in found.windows:
        job = f"job {w.job} ({','.join(w.nodes)}): {jobs[w.job]}" if w.job is not None else "no Slurm job"
        say(f"{w.window_id}  {w.mode}  {job}  window {w.state}" + (f", {w.verdict}" if w.verdict else ""))
    page = Path(args.html) if args.html else Path(args.directories[0]) / "campaign.html"
    write_campaign(page, found, jobs, snapshot.location if snapshot is not None else None)
    say(f"page: {page}")
    return 0


def window_status(args: argparse.Namespace) -> int:
    from fairwin.custody.slurm_return import standing
    from fairwin.directory.layout import WindowDir

    for line in standing(WindowDir.existing(args.window)):
        say(line)
    return 0


def _command(args: argparse.Namespace, plan: Path, mode: str) -> list[str]:
    """The `fairwin run` the job runs: this Python, the same plan and overrides, quiet (its output is the job's)."""
    command = [sys.executable, "-m", "fairwin", "run", str(plan), "--mode", mode, "--quiet"]
    command += [flag for override in args.overrides for flag in ("--set", override)]
    command += ["--out", str(Path(args.out).resolve())] if args.out else []
    command += ["--chain"] if args.chain else ["--chain-last"] if args.chain_last else []
    command += ["--chain-production", str(Path(args.chain_production).resolve())] if args.chain_production else []
    return command


def say(line: str) -> None:
    _console.stdout.print(line, markup=False, soft_wrap=True)


def say_verdict(output: Path) -> None:
    """The window's verdict line (or its error), from the output its job or step wrote."""
    said = output.read_text(errors="replace").strip().splitlines() if output.exists() else []
    if verdict := next((line for line in reversed(said) if line.startswith(("verdict:", "fairwin: error:"))), None):
        say(verdict)


def production_to_requeue(plan: Plan) -> ScheduledProduction | None:
    """Where the cluster does not preempt (``slurm_take_down = "requeue"``), production's job, found before anything
    is queued (one Slurm does not hold, or holds twice, is refused now): submit requeues it once the window's job is
    queued, so that the window's job gets its node."""
    from fairwin.production.scheduled import ScheduledProduction

    production, cluster = plan.production, plan.cluster
    if production is None or production.slurm_job is None or production.slurm_take_down != "requeue":
        return None
    assert cluster is not None  # the plan requires [cluster] beside a Slurm production
    scheduled = ScheduledProduction(production.slurm_job, cluster.nodes)
    scheduled.seen()
    return scheduled


def submit_window(args: argparse.Namespace) -> int:
    import asyncio

    from fairwin.custody.slurm_job import JobRequest, follow, sbatch_argv, submit
    from fairwin.custody.slurm_return import after_job
    from fairwin.gates.estimate import estimate
    from fairwin.plan import load_plan
    from fairwin.plan.schedule import default_mode, resolve_mode
    from fairwin.plan.site import Site

    loaded = load_plan(args.plan, args.overrides)
    cluster = loaded.plan.cluster
    if cluster is None:
        raise PlanError(f"{loaded.path}: no [cluster] section; `fairwin submit` runs a window as a Slurm job on one")
    mode_name = args.mode or default_mode(loaded)
    found = estimate(loaded, mode_name, resolve_mode(loaded, mode_name))
    request = JobRequest.of(found)
    output = (Path(args.out) if args.out else loaded.output_dir()).resolve()
    output.mkdir(parents=True, exist_ok=True)
    plan = Path(args.plan).resolve()
    if args.chain or args.chain_last:
        return _submit_chained(args, Site.of(loaded), output, request, _command(args, plan, mode_name))
    argv = sbatch_argv(
        cluster, request, f"fairwin-{mode_name}", output / "slurm-%j.out", _command(args, plan, mode_name)
    )
    requeued = production_to_requeue(loaded.plan)
    job = submit(argv)
    say(
        f"submitted Slurm job {job}: nodes {cluster.wanted} alone, limit {request.time_limit_min} min, "
        f"TERM {request.signal_lead_s} s before it; output {output / f'slurm-{job}.out'}"
    )
    if requeued is not None:
        say(f"for job {job}: {requeued.requeue()}")
    if args.no_follow:
        return 0
    ended = asyncio.run(follow(job, say))
    say_verdict(output / f"slurm-{job}.out")
    restored = asyncio.run(after_job(Site.of(loaded), output, job, say))
    if restored is not None and not restored.restored:
        return RestoreFailed.exit_code
    if ended.exit_code:
        return ended.exit_code  # the window's own exit status (docs/cli.md)
    if ended.state == "COMPLETED":
        return 0
    say(
        f"job {job} ended {ended.state} before its window closed; `fairwin recover {args.plan}` gives production "
        "back if the window could not"
    )
    return INTERRUPTED


def _submit_chained(args: argparse.Namespace, site: Site, output: Path, request: JobRequest, command: list[str]) -> int:
    """A window of a chain: a step of the chain's hold job (docs/cluster.md)."""
    import asyncio

    from fairwin.custody.slurm_chain import after_chain, run_chained

    if args.no_follow:
        raise InputError("--no-follow with a chain on Slurm: the follow ends the chain's hold job; run it without")
    requeued = production_to_requeue(site.plan)
    ran = asyncio.run(
        run_chained(
            site,
            output,
            request,
            command,
            say,
            hold_minutes=args.hold_minutes,
            after_submit=lambda job: say(f"for job {job}: {requeued.requeue()}") if requeued is not None else None,
        )
    )
    say_verdict(ran.output)
    restored = None if ran.goes_on else asyncio.run(after_chain(site, output, ran.job, say))
    if restored is not None and not restored.restored:
        return RestoreFailed.exit_code
    return ran.code
