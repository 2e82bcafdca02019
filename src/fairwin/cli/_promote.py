"""`fairwin promote check`: ALLOWED (exit 0) or REFUSED (exit 7, the answer is no) with every reason, one line each."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from fairwin.cli import _console
from fairwin.cli._arguments import file_to_write, window_directory
from fairwin.errors import ANSWER_IS_NO

if TYPE_CHECKING:
    from fairwin.cli._arguments import Commands


def add_parsers(commands: Commands) -> None:
    promote = commands.add_parser("promote", help="the promotion gate: may a window's WIN promote its candidate?")
    which = promote.add_subparsers(dest="promote_command", required=True, metavar="SUBCOMMAND")
    check = which.add_parser("check", help="ALLOWED (exit 0) or REFUSED (exit 7) with every reason")
    check.add_argument("window", type=window_directory, help="the window directory")
    check.add_argument("--policy", required=True, metavar="FILE", help="the promotion policy (promote.toml)")
    file_to_write(check, "the receipt (default: WINDOW/promotion.json)", old="--out")
    check.set_defaults(func=promote_check)


def promote_check(args: argparse.Namespace) -> int:
    from fairwin.promote.check import check_promotion
    from fairwin.promote.policy import load_policy

    policy_path = Path(args.policy)
    policy, digest = load_policy(policy_path)
    receipt = check_promotion(args.window, policy, policy_path, digest, args.to)
    _console.stdout.print(receipt.verdict, markup=False)
    for reason in receipt.reasons:
        _console.stdout.print(f"  - {reason}", markup=False, soft_wrap=True)
    for accepted in receipt.accepted:  # not a reason: said beside the answer, and kept in the receipt
        _console.stderr.print(f"note: {accepted}", markup=False, soft_wrap=True)
    return 0 if receipt.verdict == "ALLOWED" else ANSWER_IS_NO
