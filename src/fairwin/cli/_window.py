"""Handlers for plan, run, sim and prompts: parse results in, library calls, printed results out."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from fairwin.cli._console import stderr, stdout
from fairwin.cli._progress import Say, window_display
from fairwin.errors import UsageError
from fairwin.window.progress import Listener

if TYPE_CHECKING:
    from fairwin.plan.loading import LoadedPlan


def print_notices(loaded: LoadedPlan) -> None:
    for notice in loaded.notices:
        stderr.print(f"note: {notice}", markup=False)


def plan_check(args: argparse.Namespace) -> int:
    from fairwin.decision import get_rule
    from fairwin.gates.budget import check_budget
    from fairwin.gates.sequence import estimates
    from fairwin.plan import load_plan
    from fairwin.window.preflight import error_rate_check, preflight, read_plan_archive_starts

    loaded = load_plan(args.plan)
    print_notices(loaded)
    modes = loaded.plan.all_modes()
    for mode in modes:
        preflight(loaded, mode)
    # The budget's gate, as `fairwin run` applies it: a plan that cannot fit is not OK.
    for found in estimates(loaded, loaded.output_dir(), read_plan_archive_starts(loaded)):
        check_budget(loaded, found)
    stdout.print(
        f"{args.plan}: OK (sha256 {loaded.sha256}); roles {', '.join(loaded.plan.roles)}; "
        f"modes {', '.join(modes) or '(none)'}; cells {', '.join(loaded.plan.cells)}"
    )
    for warning in error_rate_check(loaded, get_rule(loaded.plan.window.rule)):
        stderr.print(f"warning: {warning}", markup=False)
    return 0


def plan_show(args: argparse.Namespace) -> int:
    from fairwin.gates.sequence import estimates
    from fairwin.plan import load_plan
    from fairwin.report.dryplan import render_dry_plan
    from fairwin.window.preflight import first_look_archive, hold_lines, power_check, preflight, read_plan_archive

    loaded = load_plan(args.plan)
    print_notices(loaded)
    checked = preflight(loaded, args.mode)
    snapshot = read_plan_archive(loaded)
    budgets = estimates(loaded, loaded.output_dir(),
                        first_look_archive(loaded, checked.rule, snapshot, checked.mode_name))  # fmt: skip
    stdout.print(render_dry_plan(loaded, checked.mode_name, checked.mode, checked.rule, budgets), markup=False)
    chosen = next(found for found in budgets if found.mode == checked.mode_name)
    for line in ["", *hold_lines(loaded, checked.rule, checked.mode_name, chosen, snapshot)]:
        stdout.print(line, markup=False)
    warnings = power_check(loaded, checked.rule, checked.mode_name)
    stdout.print("", markup=False)
    if warnings:
        for warning in warnings:
            stdout.print(f"warning: {warning}", markup=False)
    else:
        stdout.print("power: no warning from the control archive's noise", markup=False)
    return 0


def run(args: argparse.Namespace) -> int:
    from fairwin.gates.power import audit_trials
    from fairwin.gates.sequence import GateInputs
    from fairwin.plan import load_plan
    from fairwin.report.console import print_decision
    from fairwin.window.run import WindowResult, run_window

    if args.chain_production and not (args.chain or args.chain_last):
        raise UsageError("--chain-production goes with --chain or --chain-last")
    audit_trials()  # a bad setting is refused before anything is touched, not when the summary is written
    loaded = load_plan(args.plan)
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
        return await run_window(loaded, args.mode, say=say, progress=listener, output_dir=output, gates=gates,
                                coordinator=args.coordinator, chain=chain, chain_production=capture)  # fmt: skip

    with window_display(stderr, quiet=args.quiet, as_json=args.progress_json) as (say, listener):
        result = asyncio.run(until_signalled(say, listener))
    if args.progress_json:
        return 0  # its last line, the close event, carries the verdict and the window's directory
    print_decision(stdout, result.decision)
    stdout.print(f"report: {result.window.summary}")
    if (page := result.window.path / "report.html").exists():
        stdout.print(f"page: {page}", markup=False)
    return 0


def sim(args: argparse.Namespace) -> int:
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
        per_request_metrics=args.per_request_metrics,
        clock=args.clock,
        eos_token_id=args.eos_token_id,
        api_key=args.api_key or os.environ.get("VLLM_API_KEY") or None,
    )
    serve(config, args.host, args.port)
    return 0


def prompts(args: argparse.Namespace) -> int:
    from fairwin.client.families import Tokenization, build_families

    if (args.tokens is None) != (args.tokenize_url is None and args.tokenizer is None):
        raise UsageError("--tokens needs --tokenize-url URL (with --model) or --tokenizer FILE, and they need it")
    if args.tokenize_url and args.tokenizer:
        raise UsageError("give --tokenize-url or --tokenizer, not both")
    cut = None
    if args.tokens is not None:
        tokenizer = Path(args.tokenizer) if args.tokenizer else None
        cut = Tokenization(tokens=args.tokens, tokenize_url=args.tokenize_url, model=args.model, tokenizer=tokenizer)
    built = build_families(args.family, Path(args.out), count=args.count, min_chars=args.min_chars, seed=args.seed,
                           cut=cut)  # fmt: skip
    for family in asyncio.run(built):
        cut_note = f", each cut to {args.tokens} tokens" if args.tokens else ""
        stdout.print(f"# {family.count} prompts{cut_note} -> {family.prompts_path}", markup=False)
        stdout.print(family.plan_snippet(Path(args.plan_dir)), markup=False)
    return 0


def rehearse(args: argparse.Namespace) -> int:
    from fairwin.errors import RehearsalFailed
    from fairwin.gates.rehearsal import run_rehearsal
    from fairwin.plan import load_plan

    loaded = load_plan(args.plan)
    print_notices(loaded)
    document = run_rehearsal(loaded, args.url, Path(args.out), args.model, args.api_key_env, args.eos)
    for probe in document["probes"]:
        state = "ok" if probe["ok"] else probe["reading"]
        stdout.print(f"  {probe['name']:<24} HTTP {probe.get('status')}  {state}", markup=False)
    if document["verdict"] != "PASS":
        confirmed = (
            "" if document["cause_confirmed"] else " (cause not confirmed: a control probe did not fail as expected)"
        )
        raise RehearsalFailed(f"rehearsal FAIL{confirmed}: {document['failures'][0] if document['failures'] else ''} "
                              f"[{args.out}/rehearsal.json]")  # fmt: skip
    stdout.print(f"rehearsal PASS against {document['url']}; cause confirmed; {args.out}/rehearsal.json", markup=False)
    return 0


def recover(args: argparse.Namespace) -> int:
    from fairwin.plan import load_plan
    from fairwin.window.recover import recover as recover_window

    loaded = load_plan(args.plan)
    out = loaded.output_dir(args.out)
    result = asyncio.run(recover_window(loaded, out))
    stdout.print(result.summary(), markup=False)
    return 0


def stage(args: argparse.Namespace) -> int:
    from fairwin.plan import load_plan, resolve_mode
    from fairwin.window.stage import stage as stage_checkouts

    loaded = load_plan(args.plan)
    if args.mode is not None:
        mode = resolve_mode(loaded, args.mode)
        roles = [mode.control, mode.candidate]
    else:
        roles = list(loaded.plan.roles)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    receipt = args.receipt or loaded.output_dir(None) / f"stage-{stamp}.json"
    asyncio.run(stage_checkouts(loaded, roles, receipt, lambda line: stdout.print(line, markup=False)))
    stdout.print(f"STAGED: receipt {receipt}", markup=False)
    return 0
