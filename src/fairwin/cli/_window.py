"""`fairwin run`, `recover` and `stage`: a window run, a dead one recovered, pinned checkouts staged between windows."""

from __future__ import annotations

import argparse
import asyncio
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import uvloop

from fairwin.cli import _console
from fairwin.cli._arguments import chain_arguments, file_to_write, plan_argument, window_arguments
from fairwin.cli._plan import print_notices
from fairwin.cli._progress import Say, window_display
from fairwin.errors import UsageError

if TYPE_CHECKING:
    from fairwin.cli._arguments import Commands
    from fairwin.window.progress import Listener


def add_parsers(commands: Commands) -> None:
    window = commands.add_parser(
        "run", help="run one window: control and candidate take turns, as many starts as the rule registers"
    )
    plan_argument(window)
    window_arguments(window)
    window.add_argument("-q", "--quiet", action="store_true", help="no progress lines or display")
    window.add_argument(
        "--progress-json",
        action="store_true",
        help="progress events (fairwin.progress/1) as JSON lines on _console.stdout, not the tables",
    )
    window.add_argument("--qualification", help="a CARRIED receipt from `fairwin qualify carry`")
    window.add_argument(
        "--require-gate", action="append", default=[], help="a PASS receipt from `fairwin gate run` (repeatable)"
    )
    window.add_argument("--require-rehearsal", help="a PASS rehearsal directory from `fairwin rehearse`")
    window.add_argument(
        "--expected-commit",
        "--expected-experiment-commit",
        dest="expected_commit",
        help="refuse unless the plan's repository ([qualification] repo) is at this commit and clean "
        "(default: window.expected_commit)",
    )
    window.add_argument(
        "--coordinator",
        help="who runs this window, kept in the hardware's lock (default: $FAIRWIN_COORDINATOR, else your user name)",
    )
    window.add_argument(
        "--round-seed",
        type=int,
        help="a many-arm window: the seed of its rounds' orders, to repeat a window's (default: drawn; window.json)",
    )
    chain_arguments(window)
    window.set_defaults(func=run)
    recovery = commands.add_parser(
        "recover", help="after fairwin died: stop the window's servers, give production back, mark it interrupted"
    )
    plan_argument(recovery)
    recovery.add_argument("--out", help="the plan's output directory, if not window.output_dir")
    recovery.set_defaults(func=recover)
    staging = commands.add_parser(
        "stage",
        help="between windows: bring each pinned checkout on its host to its "
        "commit and write its declared artifacts, with a receipt",
    )
    plan_argument(staging)
    staging.add_argument("--mode", help="only this mode's roles (default: every role that pins a checkout)")
    file_to_write(staging, "where the receipt goes (default: OUTPUT_DIR/stage-TIME.json)", old="--receipt")
    staging.set_defaults(func=stage)


def run(args: argparse.Namespace) -> int:
    from fairwin.gates.power import audit_trials
    from fairwin.gates.sequence import GateInputs
    from fairwin.plan import load_plan
    from fairwin.plan.schedule import default_mode
    from fairwin.report.console import print_decision
    from fairwin.window.run import WindowResult, run_window

    if args.chain_production and not (args.chain or args.chain_last):
        raise UsageError("--chain-production goes with --chain or --chain-last")
    audit_trials()  # a bad setting is refused before anything is touched, not when the summary is written
    loaded = load_plan(args.plan, args.overrides)
    print_notices(loaded)
    output = Path(args.out) if args.out else None
    gates = GateInputs(
        qualification=Path(args.qualification) if args.qualification else None,
        gates=[Path(p) for p in args.require_gate],
        rehearsal=Path(args.require_rehearsal) if args.require_rehearsal else None,
        expected_commit=args.expected_commit,
    )

    async def until_signalled(say: Say, listener: Listener | None) -> WindowResult:
        # Ctrl-C, SIGTERM and SIGHUP (the terminal or ssh session went away) cancel the window, so that
        # every server is stopped, production given back and the window marked interrupted. Handled by
        # the loop, a second one cancels again (which the window's close absorbs) instead of raising
        # KeyboardInterrupt in the middle of a restore, as asyncio.run's own Ctrl-C handling would.
        task = asyncio.current_task()
        assert task is not None
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            asyncio.get_running_loop().add_signal_handler(sig, task.cancel)
        chain: Literal["chain", "last"] | None = "chain" if args.chain else "last" if args.chain_last else None
        capture = Path(args.chain_production) if args.chain_production else None
        return await run_window(
            loaded,
            args.mode or default_mode(loaded),
            say=say,
            progress=listener,
            output_dir=output,
            gates=gates,
            coordinator=args.coordinator,
            chain=chain,
            chain_production=capture,
            round_seed=args.round_seed,
        )

    with window_display(_console.stderr, quiet=args.quiet, as_json=args.progress_json) as (say, listener):
        # uvloop's event loop (libuv; its transports in C): the client's CPU per streamed token about two thirds
        # of asyncio's own loop's at 32 streams (benchmarks/README.md): one process follows more streams.
        result = uvloop.run(until_signalled(say, listener))
    if args.progress_json:
        return 0  # its last line, the close event, carries the verdict and the window's directory
    print_decision(_console.stdout, result.decision)
    _console.stdout.print(f"report: {result.window.summary}")
    if (page := result.window.report_page).exists():
        _console.stdout.print(f"page: {page}", markup=False)
    return 0


def recover(args: argparse.Namespace) -> int:
    from fairwin.custody.recover import recover as recover_window
    from fairwin.errors import ReleaseOwed
    from fairwin.plan import load_plan

    loaded = load_plan(args.plan, args.overrides)
    out = loaded.output_dir(args.out)
    result = asyncio.run(recover_window(loaded, out))
    if result.owed:  # everything else done; what is still owed is the error, with what was done
        raise ReleaseOwed(result.summary())
    _console.stdout.print(result.summary(), markup=False)
    return 0


def stage(args: argparse.Namespace) -> int:
    from fairwin.custody.stage import stage as stage_checkouts
    from fairwin.plan import load_plan, resolve_mode

    loaded = load_plan(args.plan, args.overrides)
    if args.mode is not None:
        mode = resolve_mode(loaded, args.mode)
        roles = list(mode.roles)
    else:
        roles = list(loaded.plan.roles)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    receipt = args.to or loaded.output_dir(None) / f"stage-{stamp}.json"
    asyncio.run(stage_checkouts(loaded, roles, receipt, lambda line: _console.stdout.print(line, markup=False)))
    _console.stdout.print(f"STAGED: receipt {receipt}", markup=False)
    return 0
