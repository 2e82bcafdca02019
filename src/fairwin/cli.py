"""The ``fairwin`` command. Thin: parse, call the library, print, map errors to exit codes.

Exit codes: 0 done (whatever the verdict), 1 other fairwin error, 2 bad input (nothing
was started), 3 a window failed (its directory is marked failed), 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console

from fairwin import __version__
from fairwin.errors import FairwinError, UsageError

stdout = Console(highlight=False, soft_wrap=True)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def _plan_check(args: argparse.Namespace) -> int:
    from fairwin.plan import load_plan
    from fairwin.window.run import preflight

    loaded = load_plan(args.plan)
    modes = loaded.plan.all_modes()
    for mode in modes:
        preflight(loaded, mode)
    stdout.print(
        f"{args.plan}: OK (sha256 {loaded.sha256}); roles {', '.join(loaded.plan.roles)}; "
        f"modes {', '.join(modes) or '(none)'}; cells {', '.join(loaded.plan.cells)}"
    )
    return 0


def _plan_show(args: argparse.Namespace) -> int:
    from fairwin.plan import load_plan
    from fairwin.report.dryplan import render_dry_plan
    from fairwin.window.run import preflight

    loaded = load_plan(args.plan)
    checked = preflight(loaded, args.mode)
    stdout.print(render_dry_plan(loaded, checked.mode_name, checked.mode, checked.rule), markup=False)
    return 0


def _run(args: argparse.Namespace) -> int:
    from fairwin.plan import load_plan
    from fairwin.report.console import print_decision
    from fairwin.window.run import run_window

    loaded = load_plan(args.plan)
    output = Path(args.out) if args.out else None
    say = (lambda _msg: None) if args.quiet else (lambda msg: stderr.print(msg, markup=False))
    result = asyncio.run(run_window(loaded, args.mode, say=say, output_dir=output))
    print_decision(stdout, result.decision)
    stdout.print(f"report: {result.window.summary}")
    return 0


def _sim(args: argparse.Namespace) -> int:
    from fairwin.sim.app import FAULTS, serve
    from fairwin.sim.model import SimConfig

    unknown = sorted(set(args.fault) - FAULTS.keys())
    if unknown:
        raise UsageError(f"unknown --fault {', '.join(unknown)}; choose from {', '.join(FAULTS)}")
    acceptance = tuple(float(x) for x in args.acceptance.split(",")) if args.acceptance else ()
    if any(not 0 <= a <= 1 for a in acceptance):
        raise UsageError("--acceptance values must lie in [0, 1], e.g. 0.8,0.6,0.4")
    config = SimConfig(
        model=args.model,
        spec_tokens=args.spec_tokens,
        acceptance=acceptance,
        draft_probability=args.draft_probability,
        ms_per_round=args.ms_per_round,
        ms_per_draft_token=args.ms_per_draft_token,
        prefill_ms_per_token=args.prefill_ms_per_token,
        jitter=args.jitter,
        seed=args.seed,
        faults=frozenset(args.fault),
        reject_params=frozenset(args.reject_param),
    )
    serve(config, args.host, args.port)
    return 0


def _prompts(args: argparse.Namespace) -> int:
    from fairwin.load.families import build_family

    out = Path(args.out)
    for spec in args.family:
        name, _, source = spec.partition("=")
        built = build_family(name, source or name, out, count=args.count, min_chars=args.min_chars, seed=args.seed)
        stdout.print(f"# {built.count} prompts -> {built.prompts_path}", markup=False)
        stdout.print(built.plan_snippet(Path(args.plan_dir)), markup=False)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fairwin",
        description="Decide fairly whether a serving change wins: bracketed OFF/ON/OFF windows, the server's own "
        "counters pooled per repeat, and a registered decision rule.",
    )
    parser.add_argument("--version", action="version", version=f"fairwin {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log HTTP errors and details to stderr")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    plan = commands.add_parser("plan", help="check a plan file or show its dry plan")
    plan_commands = plan.add_subparsers(dest="plan_command", required=True, metavar="SUBCOMMAND")
    check = plan_commands.add_parser("check", help="validate a plan and every file it pins")
    check.add_argument("plan", type=Path)
    check.set_defaults(func=_plan_check)
    show = plan_commands.add_parser("show", help="print the starts, waves, seeds, prompt ids and estimated duration")
    show.add_argument("plan", type=Path)
    show.add_argument("--mode", default="controlled", help="mode to show (default: controlled)")
    show.set_defaults(func=_plan_show)

    run = commands.add_parser("run", help="run one bracketed window (control, candidate, control)")
    run.add_argument("plan", type=Path)
    run.add_argument("--mode", default="controlled", help="mode to run (default: controlled)")
    run.add_argument("--out", help="directory to create the window in (default: the plan's window.output_dir)")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    run.set_defaults(func=_run)

    sim = commands.add_parser("sim", help="run the reference server (OpenAI-compatible, vLLM's metrics)")
    sim.add_argument("--host", default="127.0.0.1")
    sim.add_argument("--port", type=int, default=8000)
    sim.add_argument("--model", default="sim", help="served model name")
    sim.add_argument("--spec-tokens", type=int, default=0, help="draft tokens per round; 0 turns speculation off")
    sim.add_argument("--acceptance", default="", help="acceptance probability by position, e.g. 0.8,0.6,0.4")
    sim.add_argument("--draft-probability", type=float, default=1.0, help="chance a round proposes at all")
    sim.add_argument("--ms-per-round", type=float, default=5.0, help="decode round cost")
    sim.add_argument("--ms-per-draft-token", type=float, default=0.0, help="extra cost per proposed token")
    sim.add_argument("--prefill-ms-per-token", type=float, default=0.01)
    sim.add_argument("--jitter", type=float, default=0.02, help="relative s.d. of each round's time")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--fault", action="append", default=[], help="inject a fault (repeatable): see docs")
    sim.add_argument("--reject-param", action="append", default=[], help="answer 400 to requests with this key")
    sim.set_defaults(func=_sim)

    prompts = commands.add_parser("prompts", help="build prompt families and frozen order files from local text")
    prompts.add_argument(
        "--family",
        action="append",
        required=True,
        help="NAME or NAME=SOURCE; built-in: prose, code; SOURCE may be a .jsonl, a text file or a directory",
    )
    prompts.add_argument("--out", required=True, help="directory for NAME.jsonl and NAME.order.json")
    prompts.add_argument("--count", type=int, default=12, help="prompts per family")
    prompts.add_argument("--min-chars", type=int, default=20000, help="minimum characters per prompt")
    prompts.add_argument("--seed", type=int, default=42, help="seed of the frozen order")
    prompts.add_argument("--plan-dir", default=".", help="paths in the printed plan snippet are relative to this")
    prompts.set_defaults(func=_prompts)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, format="%(name)s: %(message)s")
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except FairwinError as exc:
        where = f" (window marked {'interrupted' if exc.exit_code == 130 else 'failed'}: {exc.window_path})"
        stderr.print(f"fairwin: error: {exc}{where if exc.window_path else ''}", markup=False, soft_wrap=True)
        return exc.exit_code
    except KeyboardInterrupt:
        stderr.print("fairwin: interrupted", markup=False)
        return 130


if __name__ == "__main__":
    sys.exit(main())
