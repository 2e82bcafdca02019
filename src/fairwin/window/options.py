"""How a window may be asked for: :class:`WindowOptions` as the API takes them, :class:`RunOptions` as read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypedDict

from fairwin.gates.sequence import GateInputs
from fairwin.rows import Order
from fairwin.window.processes import Launcher, local_launcher
from fairwin.window.progress import Listener


def quiet(_: str) -> None:
    return None


class WindowOptions(TypedDict, total=False):
    """How :func:`open_window` and :func:`run_window` may be told to run a window; all optional."""

    launcher: Launcher  # starts each role's server (tests inject their own)
    say: Callable[[str], None]  # progress lines
    progress: Listener | None  # progress events, fairwin.progress/1 (window/progress.py)
    output_dir: Path | None  # where the window's directory is made (default: the plan's window.output_dir)
    order: Order | None  # overrides the rule's draw (tests; chained windows that balance orders)
    gates: GateInputs | None  # the receipts the window must be given
    coordinator: str | None  # who runs it, for the lock (default: FAIRWIN_COORDINATOR, else the user)
    chain: Literal["chain", "last"] | None  # --chain (leave production down) or --chain-last (end the chain)
    chain_production: Path | None  # --chain-production: a new capture of production, when its declaration changed
    round_seed: int | None  # a many-arm window's seed of its rounds' orders (default: drawn)


@dataclass(frozen=True)
class RunOptions:
    """:class:`WindowOptions` as given, each with its default: made once where a window is asked for, then read
    as attributes (the defaults are said here, not at each read)."""

    launcher: Launcher = local_launcher
    say: Callable[[str], None] = quiet
    progress: Listener | None = None
    output_dir: Path | None = None
    order: Order | None = None
    gates: GateInputs = field(default_factory=GateInputs)
    coordinator: str | None = None
    chain: Literal["chain", "last"] | None = None
    chain_production: Path | None = None
    round_seed: int | None = None

    @classmethod
    def of(cls, options: WindowOptions) -> RunOptions:
        given = {key: value for key, value in options.items() if value is not None}
        return cls(**given)  # type: ignore[arg-type]  # WindowOptions' keys are this class's fields
