"""The two consoles every command prints to: results on stdout, progress and errors on stderr."""

from rich.console import Console

stdout = Console(highlight=False, soft_wrap=True)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)
