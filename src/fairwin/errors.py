"""fairwin's exception tree.

Every error fairwin raises on purpose is a :class:`FairwinError`. The CLI prints
``str(error)`` as one line and exits with the class's ``exit_code``; anything else
escaping is a bug and keeps its traceback.

::

    FairwinError                      exit 1
    ├── InputError                    exit 2   the user's input is wrong; nothing was touched
    │   ├── PlanError                          a plan file that does not load or validate
    │   ├── PinMismatchError                   a pinned file's sha256 differs from the plan's pin
    │   ├── OutputDirError                     the output directory cannot be created or written
    │   ├── UsageError                         a command-line value that makes no sense
    │   ├── MissingExtraError                  a feature needs an optional extra that is not installed
    │   ├── CorruptRecordError                 a stored file is torn, not JSON, of an unread format, or invalid
    │   └── ArchiveError                       the control archive cannot be reached, or its schema is not fairwin's
    ├── WindowError                   exit 3   a window started and could not finish
    │   ├── LaunchError                        a server did not come up
    │   │   ├── ServerExitedError              its process exited before it was healthy
    │   │   ├── HealthTimeoutError             it never answered its health path in time
    │   │   └── HostUnreachable                its host could not be reached over SSH (retried within reconnect_s)
    │   ├── WaveError                          the client could not measure a wave (LoadError: old name)
    │   │   ├── HTTPStatusError                the server answered non-2xx (carries the body)
    │   │   ├── TransportError                 no answer: refused, reset, timed out
    │   │   └── StreamError                    a reply that was not a valid, full stream
    │   ├── PromptError                        a prompt cannot be cut to its cell's length
    │   ├── MetricsError                       /metrics missing, unparseable or without a counter
    │   ├── RuntimeCheckError                  a start's environment or speculative config is not the declared one
    │   └── ProductionError                    production would not go down, or the hardware was not quiet
    ├── GateRefused                   exit 4   a gate refused before any host was touched
    ├── RehearsalFailed               exit 5   the API rehearsal ran and did not PASS
    ├── RestoreFailed                 exit 6   production was taken down and did not come back healthy
    └── Interrupted                   exit 130 Ctrl-C, SIGTERM or SIGHUP; servers stopped

A command that asks a yes-or-no question and gets "no" is not an error: it exits
:data:`ANSWER_IS_NO` (7), never 1, so a script can tell a refusal from a crash.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

#: The exit code of a question answered "no": promote check REFUSED, production status DOWN, compare: the
#: windows disagree. Not an error (nothing failed), and not 1, which a bug's traceback also ends with.
ANSWER_IS_NO = 7


class FairwinError(Exception):
    """Base of every deliberate fairwin error; its message is one line.

    Its context is given where it is made: ``window_path`` (the directory the error ended,
    now marked failed or interrupted), ``window_state`` (when it is not what the exit code
    says: a restore that failed after a complete window), ``aftermath`` (what was done after
    it: a chain aborted, production restored). An error raised deep inside a step cannot
    know its window, nor what was done after it; whoever catches it on its way out (the
    window's close, a chain aborted before its window opened) adds that with
    :meth:`with_context`, once.
    """

    exit_code: ClassVar[int] = 1

    def __init__(
        self,
        *args: object,
        window_path: Path | None = None,
        window_state: str | None = None,
        aftermath: str | None = None,
        details: Sequence[str] = (),
    ) -> None:
        super().__init__(*args)
        self.window_path = window_path
        self.window_state = window_state
        self.aftermath = aftermath
        #: The problems the one line counts but does not name (its "(+N more; -v lists them)"): `fairwin -v`
        #: prints each on a line of its own under the error.
        self.details = tuple(details)

    def with_context(
        self, *, window_path: Path | None = None, window_state: str | None = None, aftermath: str | None = None
    ) -> None:
        """Context for an error already raised: the window it ended, its state, what was done after it."""
        self.window_path = window_path or self.window_path
        self.window_state = window_state or self.window_state
        self.aftermath = aftermath or self.aftermath

    def __str__(self) -> str:
        # One line, always: the CLI prints it as is.
        return " ".join(super().__str__().split())


def more(hidden: Sequence[str]) -> str:
    """What a one-line error says of the problems it does not name (its ``details``)."""
    return f" (+{len(hidden)} more; -v lists them)" if hidden else ""


def shortlist(items: Sequence[str], shown: int) -> str:
    """The first ``shown`` of many names, comma-separated, and how many more there are (which a receipt lists)."""
    rest = f" (+{len(items) - shown} more)" if len(items) > shown else ""
    return ", ".join(items[:shown]) + rest


class InputError(FairwinError):
    """The user's input is wrong; nothing was started."""

    exit_code = 2


class SchedulerError(InputError):
    """The cluster's scheduler (Slurm) did not answer, or refused what it was asked; nothing of a window was started
    by fairwin."""


class PlanError(InputError):
    """A plan file that does not load or does not validate."""


class PinMismatchError(InputError):
    """A file whose sha256 is pinned in the plan has different contents."""


class OutputDirError(InputError):
    """The output directory cannot be created or written."""


class UsageError(InputError):
    """A command-line value that makes no sense."""


class MissingExtraError(InputError):
    """A feature needs one of fairwin's optional extras, and the module it brings is not installed."""

    #: Each extra, and what needs it.
    PURPOSES: ClassVar[dict[str, str]] = {
        "ssh": "a role, production or the hardware's lock on another host",
        "postgres": "a PostgreSQL archive",
        "report": "report.html's figures and `compare --plot`",
        "export": "`fairwin export` (CSV and Parquet)",
    }

    def __init__(self, extra: str, missing: str | None) -> None:
        package = (missing or "a module").split(".")[0]  # matplotlib, not matplotlib.backends
        super().__init__(
            f"{self.PURPOSES[extra]} needs fairwin's '{extra}' extra ({package} is not installed): "
            f"pip install 'fairwin[{extra}]'"
        )
        self.extra = extra


class CorruptRecordError(InputError):
    """A file fairwin wrote earlier is torn, not JSON, of a format this version does not read, fails
    validation, or was changed since it was sealed. The message names the file; nothing is written."""


class ArchiveError(InputError):
    """The control archive cannot be read or written: a database that does not answer, refuses the login,
    or holds a schema older or newer than this fairwin's. The message never carries a password."""


class WindowError(FairwinError):
    """A window was opened and could not finish; its directory is marked failed."""

    exit_code = 3


class LaunchError(WindowError):
    """A server did not come up."""


class ServerExitedError(LaunchError):
    """The server process exited before it answered its health check."""


class HealthTimeoutError(LaunchError):
    """The server never answered its health path before the startup deadline."""


class HostUnreachable(LaunchError):
    """A declared host could not be reached over SSH (a network failure, not a refused key): what a retry within
    the host's ``reconnect_s`` may cure."""


class WaveError(WindowError):
    """The client could not measure a wave."""


#: The old name of :class:`WaveError`, kept for one release.
LoadError = WaveError


class HTTPStatusError(WaveError):
    """The server answered with a non-2xx status; ``body`` holds what it said."""

    def __init__(self, message: str, *, status: int, body: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class TransportError(WaveError):
    """No usable answer: connection refused or reset, or a timeout."""


class StreamError(WaveError):
    """A reply that was not a valid, complete stream of exactly max_tokens."""


class PromptError(WindowError):
    """A prompt cannot be prepared for its cell (too short, or the tokenizer disagrees)."""


class MetricsError(WindowError):
    """The server's /metrics is missing, unparseable, or lacks a counter the pooling needs."""


class RuntimeCheckError(WindowError):
    """A start's effective environment or speculative configuration is not the declared one."""


class ProductionError(WindowError):
    """Production could not be taken down, or the hardware not proved quiet; production was restored."""


class ReleaseOwed(WindowError):
    """The team's release ([custody] release_command) did not release; ``fairwin recover PLAN`` runs it again."""


class GateRefused(FairwinError):
    """A gate refused (qualification, correctness receipt, runtime declaration, budget); nothing was touched."""

    exit_code = 4


class RehearsalFailed(FairwinError):
    """The API rehearsal ran and did not PASS; rehearsal.json says which probe and why."""

    exit_code = 5


class RestoreFailed(FairwinError):
    """Production was taken down and did not come back healthy: an operator must act now."""

    exit_code = 6


class Interrupted(FairwinError):
    """Ctrl-C, SIGTERM or SIGHUP; every server fairwin started was stopped (and production given back)."""

    exit_code = 130
