"""`fairwin rehearse`: every request shape of a window, tiny, against production."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from fairwin.cli import _console
from fairwin.cli._arguments import plan_argument
from fairwin.cli._plan import print_notices

if TYPE_CHECKING:
    from fairwin.cli._arguments import Commands


def add_parsers(commands: Commands) -> None:
    parser = commands.add_parser("rehearse", help="try every request shape of a window, tiny, against production")
    plan_argument(parser)
    parser.add_argument("--url", help="production's base URL (default: the plan's rehearsal.url)")
    parser.add_argument("--out", required=True, help="a new directory for rehearsal.json and responses.jsonl")
    parser.add_argument("--model", help="production's served model (default: rehearsal.model or the first role's)")
    parser.add_argument("--api-key-env", help="send Authorization: Bearer $NAME (the key is never recorded)")
    parser.add_argument(
        "--eos",
        type=int,
        help="the model's end-of-sequence token id: adds the terminator probe, "
        "forced with allowed_token_ids (default: rehearsal.eos_token_id)",
    )
    parser.set_defaults(func=rehearse)


def rehearse(args: argparse.Namespace) -> int:
    from fairwin.errors import RehearsalFailed
    from fairwin.gates.rehearsal import run_rehearsal
    from fairwin.plan import load_plan

    loaded = load_plan(args.plan, args.overrides)
    print_notices(loaded)
    document = run_rehearsal(loaded, args.url, Path(args.out), args.model, args.api_key_env, args.eos)
    for probe in document.probes:
        state = "ok" if probe.ok else probe.reading
        _console.stdout.print(f"  {probe.name:<24} HTTP {probe.status}  {state}", markup=False)
    if document.verdict != "PASS":
        confirmed = (
            "" if document.cause_confirmed else " (cause not confirmed: a control probe did not fail as expected)"
        )
        raise RehearsalFailed(
            f"rehearsal FAIL{confirmed}: {document.failures[0] if document.failures else ''} "
            f"[{args.out}/rehearsal.json]"
        )
    _console.stdout.print(
        f"rehearsal PASS against {document.url}; cause confirmed; {args.out}/rehearsal.json", markup=False
    )
    return 0
