"""The two consoles every command prints to: results on stdout, progress and errors on stderr.

Piped output (a log, CI, `tee`) gets a wide fixed width instead of rich's 80 columns,
so tables stay readable; a terminal or an explicit COLUMNS keeps its own width.
"""

import os
import sys

from rich.console import Console

PIPED_WIDTH = 160


def _width(stream: object) -> int | None:
    interactive = getattr(stream, "isatty", lambda: False)()
    return None if interactive or "COLUMNS" in os.environ else PIPED_WIDTH


stdout = Console(highlight=False, soft_wrap=True, width=_width(sys.stdout))
stderr = Console(stderr=True, highlight=False, soft_wrap=True, width=_width(sys.stderr))
