"""What every command group's parsers share: the subparsers' type, the plan group, one flag per meaning.

One meaning per flag: ``--out DIR`` is always an output root (where windows, prompts or
a rehearsal go), and a file a command writes is ``--to FILE``. The spellings of older
releases stay as hidden aliases (docs/cli.md lists them).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # argparse's subparsers type is subscriptable only for type checkers
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]

Handler = Callable[[argparse.Namespace], int]


def plan_group(commands: Commands, group: str, text: str, entries: Sequence[tuple[str, Handler, str]]) -> Commands:
    """``fairwin GROUP SUB PLAN [--out DIR]`` for each entry; returns the subparsers for extra flags."""
    parser = commands.add_parser(group, help=text)
    which = parser.add_subparsers(dest=f"{group}_command", required=True, metavar="SUBCOMMAND")
    for name, func, help_text in entries:
        command = which.add_parser(name, help=help_text)
        command.add_argument("plan", type=Path)
        command.add_argument("--out", help="the plan's output directory, if not window.output_dir (its state)")
        command.set_defaults(func=func)
    return which


def file_to_write(
    parser: argparse.ArgumentParser, text: str, *, old: str | None = None, required: bool = False
) -> None:
    """``--to FILE``: the file a command writes; ``old`` is the flag it was spelt as before (hidden)."""
    parser.add_argument("--to", type=Path, metavar="FILE", help=text + (" (required)" if required else ""))
    if old is not None:
        parser.add_argument(old, dest="to", type=Path, help=argparse.SUPPRESS)
    if required:
        parser.set_defaults(requires_to=parser)


def check_required(args: argparse.Namespace) -> None:
    """``--to`` may be spelt by its old name too, so argparse cannot require it; this does, after parsing."""
    command: argparse.ArgumentParser | None = getattr(args, "requires_to", None)
    if command is not None and args.to is None:
        command.error("the following arguments are required: --to")
