"""The ``fairwin`` command. Thin: parse, call the library, print, map errors to exit codes.

Each command group's module (``_plan``, ``_window``, ``_decision``, ...) owns its parsers
and handlers; this module only assembles them and turns errors into exit codes: 0 done
(whatever the verdict), 1 other fairwin error or a bug, 2 bad input (nothing was started;
a stored file torn, edited or of another format included), 3 a window failed (its
directory is marked failed), 4 a gate refused (nothing was started), 5 the API rehearsal
did not pass, 6 production did not come back healthy (RESTORE FAILED), 7 the answer is
no (REFUSED, DOWN, the windows disagree), 130 interrupted. A bug's traceback is printed
scrubbed of every resolved secret.
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys
import traceback
from collections.abc import Callable, Sequence

from fairwin.cli import (
    _archive,
    _chain,
    _cluster,
    _console,
    _decision,
    _gates,
    _plan,
    _production,
    _promote,
    _prompts,
    _rehearse,
    _report,
    _sim,
    _window,
)
from fairwin.cli._arguments import Parser, check_required
from fairwin.errors import FairwinError
from fairwin.redaction import ScrubbingFormatter, scrub

#: Every command group, in the order `fairwin --help` lists them; each module owns its parsers and handlers.
GROUPS = (
    _plan,
    _window,
    _cluster,
    _sim,
    _prompts,
    _rehearse,
    _decision,
    _archive,
    _report,
    _promote,
    _gates,
    _production,
    _chain,
)


class _Version(argparse.Action):
    """``--version``, read from the package metadata only when asked for (every command builds the parser)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from fairwin._version import __version__

        sys.stdout.write(f"fairwin {__version__}\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="fairwin",
        description="Decide fairly whether a serving change wins: windows where control and candidate take turns, "
        "the server's own counters pooled per repeat, and a registered decision rule.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show fairwin's version and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="log HTTP errors and details to stderr")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.add_parsers(commands)
    return parser


#: Allocations between two young collections (Python's default: 700). A command's own objects are mostly its
#: modules' (classes, and the validation schema pydantic builds for each model as it is imported), which survive;
#: at 700, a short command spent 6 to 7 % of its CPU scanning them again (38 of 425 ms for `fairwin production
#: status`; 13 ms at 10,000). Cyclic garbage is still collected, later.
GC_YOUNG_THRESHOLD = 10_000


def main(argv: Sequence[str] | None = None) -> int:
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    check_required(args)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, format="%(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # warnings reach stderr only with -v
        handler.setLevel(logging.INFO if args.verbose else logging.ERROR)
        handler.setFormatter(ScrubbingFormatter("%(name)s: %(message)s"))
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except FairwinError as exc:
        state = exc.window_state or f"marked {'interrupted' if exc.exit_code == 130 else 'failed'}"
        where = f" (window {state}: {exc.window_path})" if exc.window_path else ""
        after = f"; {exc.aftermath}" if exc.aftermath else ""
        _console.stderr.print(scrub(f"fairwin: error: {exc}{where}{after}"), markup=False, soft_wrap=True)
        for detail in exc.details if args.verbose else ():
            _console.stderr.print(scrub(f"  also: {detail}"), markup=False, soft_wrap=True)
        return exc.exit_code
    except KeyboardInterrupt:
        _console.stderr.print("fairwin: interrupted", markup=False)
        return 130
    except Exception:  # a bug: its traceback is for the report, without any secret this process resolved
        sys.stderr.write(scrub(traceback.format_exc()))
        _console.stderr.print(
            "fairwin: internal error: the traceback above is a bug in fairwin; please report it", markup=False
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
