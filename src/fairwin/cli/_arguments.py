"""What every command group's parsers share: one-line errors, the plan group, one flag per meaning, value types.

One meaning per flag: ``--out DIR`` is always an output root (where windows, prompts or
a rehearsal go), and a file a command writes is ``--to FILE``. The spellings of older
releases stay as hidden aliases (docs/cli.md lists them).

A value that cannot mean anything (a file where a window directory goes, nan or a
negative count) is refused while parsing, by the argument's type, with one line.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from fairwin.errors import InputError

if TYPE_CHECKING:  # argparse's subparsers type is subscriptable only for type checkers
    from fairwin.directory.layout import WindowDir

    Commands = argparse._SubParsersAction[argparse.ArgumentParser]

Handler = Callable[[argparse.Namespace], int]


def plan_argument(parser: argparse.ArgumentParser) -> None:
    """The plan file, and ``--set KEY=VALUE`` overrides of it (docs/plan.md, "Overrides at run time")."""
    parser.add_argument("plan", type=Path)
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a plan key for this run (repeatable; dotted: roles.B.repo.commit=3f2a9c1); recorded in "
        "window.json, and part of the effective plan's sha256",
    )


def plan_group(commands: Commands, group: str, text: str, entries: Sequence[tuple[str, Handler, str]]) -> Commands:
    """``fairwin GROUP SUB PLAN [--out DIR]`` for each entry; returns the subparsers for extra flags."""
    parser = commands.add_parser(group, help=text)
    which = parser.add_subparsers(dest=f"{group}_command", required=True, metavar="SUBCOMMAND")
    for name, func, help_text in entries:
        command = which.add_parser(name, help=help_text)
        plan_argument(command)
        command.add_argument("--out", help="the plan's output directory, if not window.output_dir (its state)")
        command.set_defaults(func=func)
    return which


def file_to_write(
    parser: argparse.ArgumentParser,
    text: str,
    *,
    old: str | None = None,
    required: bool = False,
    old_positional: bool = False,
) -> None:
    """``--to FILE``: the file a command writes; ``old`` is the flag it was spelt as before, ``old_positional``
    that it was a positional argument before (both hidden, both still read)."""
    parser.add_argument("--to", type=Path, metavar="FILE", help=text + (" (required)" if required else ""))
    if old is not None:
        parser.add_argument(old, dest="to", type=Path, help=argparse.SUPPRESS)
    if old_positional:
        parser.add_argument("to_positional", nargs="?", type=Path, help=argparse.SUPPRESS)
    if required:
        parser.set_defaults(requires_to=parser)


def check_required(args: argparse.Namespace) -> None:
    """``--to`` may be spelt by its old name too, so argparse cannot require it; this does, after parsing."""
    command: argparse.ArgumentParser | None = getattr(args, "requires_to", None)
    positional: Path | None = getattr(args, "to_positional", None)
    if positional is not None:
        if args.to is not None and args.to != positional:
            (command or Parser()).error(f"two files to write: {positional} and --to {args.to}; give one")
        args.to = positional
    if command is not None and args.to is None:
        command.error("the following arguments are required: --to")


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose error is one line (with where to read more), not the usage block and a line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def window_directory(text: str) -> WindowDir:
    """A window directory (the one holding window.json): refused at parse time, as the library refuses it."""
    from fairwin.directory.layout import WindowDir

    try:
        return WindowDir.existing(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def finite(text: str) -> float:
    """Any finite number (an effect or a drift may be negative); nan and inf are refused."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def non_negative(text: str) -> float:
    value = finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative; give 0 or more")
    return value


def positive(text: str) -> float:
    value = finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not above 0; give a positive number")
    return value


def count(text: str) -> int:
    """A whole number of things, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is below 1; give a whole number of at least 1")
    return value


def chain_arguments(window: argparse.ArgumentParser) -> None:
    """``--chain`` or ``--chain-last``, and ``--chain-production``: a window's part in a chain (run, submit)."""
    chained = window.add_mutually_exclusive_group()
    chained.add_argument(
        "--chain",
        action="store_true",
        help="leave production down for the next window of a chain (placeholders hold the hardware; docs/chain.md)",
    )
    chained.add_argument("--chain-last", action="store_true", help="the chain's last window: restore production")
    window.add_argument(
        "--chain-production",
        help="production's new capture (`fairwin production snapshot`) when its "
        "declaration changed since the chain left it down",
    )


def window_arguments(parser: argparse.ArgumentParser) -> None:
    """``--mode`` and ``--out``: which mode a window runs, and where its directory is made (run, submit)."""
    parser.add_argument("--mode", help="mode to run (default: controlled, or the plan's only mode)")
    parser.add_argument("--out", help="directory to create the window in (default: the plan's window.output_dir)")
