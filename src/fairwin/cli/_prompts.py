"""`fairwin prompts`: prompt families and frozen order files built from local text."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from fairwin.cli import _console
from fairwin.cli._arguments import count
from fairwin.errors import UsageError

if TYPE_CHECKING:
    from fairwin.cli._arguments import Commands


def add_parsers(commands: Commands) -> None:
    parser = commands.add_parser(
        "prompts",
        help="build prompt families and frozen order files from local text (or `prompts import` an order you have)",
    )
    parser.add_argument(
        "--family",
        action="append",
        help="NAME or NAME=SOURCE; built-in: prose, code; SOURCE may be a .jsonl, a text file or a directory "
        "(required)",
    )
    parser.add_argument("--out", help="directory for NAME.jsonl and NAME.order.json (required)")
    parser.add_argument("--count", type=count, default=12, help="prompts per family")
    parser.add_argument("--min-chars", type=count, default=20000, help="minimum characters per prompt")
    parser.add_argument("--seed", type=int, default=42, help="seed of the frozen order")
    parser.add_argument("--plan-dir", default=".", help="paths in the printed plan snippet are relative to this")
    parser.add_argument("--tokens", type=count, help="also cut every prompt to exactly this many tokens")
    parser.add_argument(
        "--tokenize-url", help="count every prompt's tokens with this server's /tokenize (e.g. http://127.0.0.1:8000)"
    )
    parser.add_argument("--model", default="", help="model name for --tokenize-url")
    parser.add_argument("--tokenizer", help="count tokens with this local tokenizer.json instead of a server")
    parser.set_defaults(func=prompts)
    which = parser.add_subparsers(dest="prompts_command", metavar="import")
    imported = which.add_parser("import", help="a frozen order you have (lists of prompt ids per family), pinned")
    imported.add_argument("orders", type=Path, help='a JSON file: {"FAMILY": ["id", ...], ...}, the order windows take')
    imported.add_argument(
        "--family", action="append", required=True, help="NAME=PROMPTS.jsonl: each family's prompts file (repeatable)"
    )
    imported.add_argument("--out", required=True, help="directory for NAME.order.json")
    imported.add_argument("--plan-dir", default=".", help="paths in the printed plan snippet are relative to this")
    imported.set_defaults(func=prompts_import)


def prompts(args: argparse.Namespace) -> int:
    from fairwin.client.families import Tokenization, build_families

    if not args.family or not args.out:
        raise UsageError("fairwin prompts needs --family and --out (or `fairwin prompts import ORDERS.json ...`)")
    if args.tokens is not None and args.tokenize_url is None and args.tokenizer is None:
        raise UsageError("--tokens needs --tokenize-url URL (with --model) or --tokenizer FILE to count with")
    if args.tokenize_url and args.tokenizer:
        raise UsageError("give --tokenize-url or --tokenizer, not both")
    cut = None
    if args.tokenize_url or args.tokenizer:
        tokenizer = Path(args.tokenizer) if args.tokenizer else None
        cut = Tokenization(tokens=args.tokens, tokenize_url=args.tokenize_url, model=args.model, tokenizer=tokenizer)
    built = build_families(
        args.family, Path(args.out), count=args.count, min_chars=args.min_chars, seed=args.seed, cut=cut
    )
    for family in asyncio.run(built):
        cut_note = f", each cut to {args.tokens} tokens" if args.tokens else ""
        _console.stdout.print(f"# {family.sizes()}{cut_note} -> {family.prompts_path}", markup=False)
        _console.stdout.print(family.plan_snippet(Path(args.plan_dir)), markup=False)
    return 0


def prompts_import(args: argparse.Namespace) -> int:
    from fairwin.client.order_import import import_orders, read_orders

    files: dict[str, Path] = {}
    for given in args.family:
        name, equals, path = given.partition("=")
        if not equals or not name or not path:
            raise UsageError(f"--family {given!r}: write NAME=PROMPTS.jsonl")
        files[name] = Path(path)
    for family in import_orders(read_orders(args.orders), files, Path(args.out)):
        _console.stdout.print(
            f"# {family.count} prompt ids in {args.orders}'s order -> {family.order_path}", markup=False
        )
        _console.stdout.print(family.plan_snippet(Path(args.plan_dir)), markup=False)
    return 0
