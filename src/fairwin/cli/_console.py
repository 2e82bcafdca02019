"""The two consoles every command prints to: results on stdout, progress and errors on stderr.

Piped output (a log, CI, `tee`) gets a wide fixed width instead of rich's 80 columns,
so tables stay readable; a terminal or an explicit COLUMNS keeps its own width.

Each is built when a command first prints to it (``_console.stdout``, ``_console.stderr``):
rich's import was a tenth of a `fairwin sim`'s start (about 20 of 200 ms of CPU), and the
sim prints nothing; a console built then also reads the streams and COLUMNS the command runs
with, not those of whatever imported the command line.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

PIPED_WIDTH = 160


def _width(stream: object) -> int | None:
    interactive = getattr(stream, "isatty", lambda: False)()
    return None if interactive or "COLUMNS" in os.environ else PIPED_WIDTH


@functools.cache
def _build(name: str) -> Console:
    from rich.console import Console

    on_stderr = name == "stderr"
    stream = sys.stderr if on_stderr else sys.stdout
    return Console(stderr=on_stderr, highlight=False, soft_wrap=True, width=_width(stream))


def __getattr__(name: str) -> Console:
    if name in ("stdout", "stderr"):
        return _build(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
