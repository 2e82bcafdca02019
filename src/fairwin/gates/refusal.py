"""Checks: each has a name, says what it observes, and finds the problems that refuse (none: it passes).

Modelled on pyperf's system checks: small named things in one ordered list, run the same way
wherever they are run. A check finds problems and returns them as data; :func:`refuse` is the
one place a refusal is made of them (exit 4), and it names the check. A window's admission runs
its list (window/admission.py), ``fairwin plan check`` the part of it that needs no host and no
receipt, and a command that refuses on its own (``gate run``, ``qualify carry``, ``stage``)
refuses through :func:`refuse` with its own check's name.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from fairwin.errors import GateRefused, more

Given = TypeVar("Given")

#: What a check returns: the problems it found, each one line; [] when it passes.
Problems = list[str]


@dataclass(frozen=True)
class Check(Generic[Given]):
    """One named check of ``Given`` (what a run of the list is given: a window's admission, a plan)."""

    name: str
    observes: str  # what it looks at: the list documents itself (docs/gates.md names the checks in order)
    find: Callable[[Given], Problems | Awaitable[Problems]]


def refusal(check: str, problems: Sequence[str]) -> GateRefused:
    """The refusal (exit 4) of these problems (at least one): the first, how many more there are (listed by
    ``-v``) and the check's name."""
    first, rest = problems[0], list(problems[1:])
    return GateRefused(f"{first}{more(rest)} (refused by the {check} check)", details=rest)


def refuse(check: str, problems: Sequence[str]) -> None:
    """:func:`refusal` raised when there is a problem; nothing when there is none."""
    if problems:
        raise refusal(check, problems)


async def run_checks(checks: Iterable[Check[Given]], given: Given) -> None:
    """Each check in order; the first that finds a problem refuses, naming itself."""
    for check in checks:
        found = check.find(given)
        refuse(check.name, await found if inspect.isawaitable(found) else found)


def run_plain(checks: Iterable[Check[Given]], given: Given) -> None:
    """:func:`run_checks` for checks that contact nothing (none of them may be a coroutine)."""
    for check in checks:
        found = check.find(given)
        assert not inspect.isawaitable(found), f"check {check.name} contacts a host; run it with run_checks"
        refuse(check.name, found)
