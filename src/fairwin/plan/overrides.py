"""Run-time changes to a plan: ``--set KEY=VALUE`` and ``{env:NAME}`` in its pins.

A team passes the commit under test per launch (the runbook's ``--expected-experiment-commit
$H``, ``--worker-commit $Q``); editing the TOML for each would change the file's sha256 and
with it every receipt bound to it. An override changes the plan as loaded, before it is
validated, and is recorded: the effective plan is the file's bytes plus the overrides, in order.

Keys are TOML dotted keys (``roles.B.repo.commit``; a list item by its index,
``roles.B.workers.0.repo.commit``; a segment with dots or slashes quoted,
``roles.B.identity."/opt/v.py"``), parsed by tomllib itself so that a key means here what it
means in the file. A value is a TOML value when it parses as one (``3``, ``true``,
``["a", "b"]``), else the text as given; a pin's value is always text (``1234567`` is a
commit's short sha, not a number).

``{env:NAME}`` in a pin field (a commit, an identity sha256, an artifact's source) is replaced by
the variable's value at load: a pin is no secret, and the window must record what it held
the host to. Elsewhere (argv, env) placeholders stay as written until launch, as before.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from fairwin.errors import PlanError

_ENV = re.compile(r"\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Override:
    """One ``--set``: its key as written, its path, and the value it sets."""

    key: str
    path: tuple[str, ...]
    value: Any
    variable: str | None = None  # a pin's {env:NAME}: the variable(s) its value was read from

    @classmethod
    def recorded(cls, key: str, value: Any, variable: str | None = None) -> Override:
        """An override as a window's manifest recorded it."""
        return cls(key=key, path=_key_path(key, key), value=value, variable=variable)


def _key_path(key: str, given: str) -> tuple[str, ...]:
    """A TOML dotted key's parts, as tomllib reads them."""
    try:
        parsed = tomllib.loads(f"{key} = 0")
    except tomllib.TOMLDecodeError:
        raise PlanError(
            f"--set {given!r}: {key!r} is not a dotted key; quote a part holding dots or slashes, "
            'e.g. roles.B.identity."/opt/v.py"=SHA'
        ) from None
    path: list[str] = []
    node: Any = parsed
    while isinstance(node, dict):
        ((name, node),) = node.items()
        path.append(name)
    return tuple(path)


def parse_override(text: str) -> Override:
    """``KEY=VALUE`` -> an :class:`Override`; a malformed one is one line saying how to write it."""
    key, equals, raw = text.partition("=")
    key = key.strip()
    if not equals or not key:
        raise PlanError(f"--set {text!r}: write KEY=VALUE, e.g. --set roles.B.repo.commit=3f2a9c1")
    path = _key_path(key, text)
    try:
        value: Any = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw  # not a TOML value: the text itself (a path, a word)
    if _is_pin(path) and not isinstance(value, str):
        value = raw.strip()  # a pin is text: a sha of digits only (1234567) or with an e (3e45678) is no number
    return Override(key=key, path=path, value=value)


def _is_pin(path: tuple[str, ...]) -> bool:
    """Whether a key names a pin field (see ``_pin_slots``): a commit, an identity sha256, an artifact's source."""
    return path[-1] in ("commit", "expected_commit") or (len(path) > 1 and path[-2] in ("identity", "artifacts"))


def _place(data: dict[str, Any], override: Override) -> None:
    node: Any = data
    for depth, name in enumerate(override.path[:-1]):
        where = ".".join(override.path[: depth + 1])
        if isinstance(node, list):
            if not name.isdigit() or int(name) >= len(node):
                raise PlanError(f"--set {override.key}: {where} is not an item of a list of {len(node)}")
            node = node[int(name)]
        elif isinstance(node, dict):
            node = node.setdefault(name, {})
        else:
            raise PlanError(f"--set {override.key}: {'.'.join(override.path[:depth])} is a value, not a table")
    last = override.path[-1]
    if isinstance(node, list):
        if not last.isdigit() or int(last) >= len(node):
            raise PlanError(f"--set {override.key}: no item {last} in a list of {len(node)}")
        node[int(last)] = override.value
    elif isinstance(node, dict):
        node[last] = override.value
    else:
        raise PlanError(f"--set {override.key}: {'.'.join(override.path[:-1])} is a value, not a table")


def apply_overrides(data: dict[str, Any], overrides: Sequence[Override]) -> None:
    """Set each override in the parsed TOML, in order (a later one wins); validation follows."""
    for override in overrides:
        _place(data, override)


#: Where a pin is: its dotted key as written in a plan, its path, the table holding it and its name there.
PinSlot = tuple[str, tuple[str, ...], dict[str, Any], str]


def _pin_slots(data: dict[str, Any]) -> Iterator[PinSlot]:
    """Every pin field in the data."""

    def of_process(key: str, path: tuple[str, ...], process: dict[str, Any]) -> Iterator[PinSlot]:
        repo = process.get("repo")
        artifacts = repo.get("artifacts") if isinstance(repo, dict) else None
        for inner, table in ((("identity",), process.get("identity")), (("repo", "artifacts"), artifacts)):
            if isinstance(table, dict):
                for name in table:
                    yield f"{key}.{'.'.join(inner)}.{json.dumps(name)}", (*path, *inner, name), table, name
        if isinstance(repo, dict) and "commit" in repo:
            yield f"{key}.repo.commit", (*path, "repo", "commit"), repo, "commit"

    roles = data.get("roles")
    for name, role in roles.items() if isinstance(roles, dict) else ():
        if isinstance(role, dict):
            yield from of_process(f"roles.{name}", ("roles", name), role)
            workers = role.get("workers")
            for index, worker in enumerate(workers if isinstance(workers, list) else ()):
                if isinstance(worker, dict):
                    where = ("roles", name, "workers", str(index))
                    yield from of_process(".".join(where), where, worker)
    for section, field in (("production", "commit"), ("window", "expected_commit")):
        table = data.get(section)
        if isinstance(table, dict) and field in table:
            yield f"{section}.{field}", (section, field), table, field


def resolve_pin_variables(data: dict[str, Any], environ: dict[str, str] | None = None) -> list[Override]:
    """Replace ``{env:NAME}`` in every pin field with NAME's value; each such pin as the override that sets it to
    what it read (with the variables named), for the window to record. An unset or empty variable is refused by
    name: a pin that silently became '' pins nothing."""
    environ = dict(os.environ) if environ is None else environ
    read: list[Override] = []
    for key, path, table, name in _pin_slots(data):
        value = table[name]
        if not isinstance(value, str) or not _ENV.search(value):
            continue
        names = _ENV.findall(value)
        for unset in (variable for variable in names if not environ.get(variable)):
            raise PlanError(f"{key} = {value!r}: {unset} is not set (or empty); export {unset} or --set {key}")
        table[name] = _ENV.sub(lambda m: environ[m.group(1)], value)
        read.append(Override(key=key, path=path, value=table[name], variable=", ".join(names)))
    return read
