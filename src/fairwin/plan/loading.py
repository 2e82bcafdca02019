"""Loading a plan file: TOML -> validated models -> pinned files checked.

Every failure is one :class:`~fairwin.errors.PlanError` (or
:class:`~fairwin.errors.PinMismatchError`) line naming the file, the key path and
what would fix it.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from fairwin.directory.layout import WindowDir
from fairwin.directory.manifest import WindowManifest
from fairwin.errors import OutputDirError, PinMismatchError, PlanError, more
from fairwin.files import canonical_json, sha256_bytes, sha256_file
from fairwin.plan.models import Family, Plan, kernel_filesystem_problem
from fairwin.plan.order import read_order
from fairwin.plan.overrides import Override, apply_overrides, parse_override, resolve_pin_variables
from fairwin.plan.secrecy import refuse_literal_secrets
from fairwin.records import read_record
from fairwin.redaction import declare


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str


@dataclass(frozen=True)
class LoadedFamily:
    """A family's prompts in their frozen order."""

    name: str
    ordered: tuple[Prompt, ...]
    prompts_sha256: str
    order_sha256: str
    notice: str | None = None  # the order file spelt its format the old way


@dataclass(frozen=True)
class LoadedPlan:
    """A validated plan, where it came from, and its families with pins verified.

    ``sha256`` is the effective plan's: the file's own (``file_sha256``) when nothing overrides it, else
    the digest of the file's and of every override (``--set`` and pins read from variables), in order.
    """

    path: Path
    raw: bytes
    sha256: str
    plan: Plan
    families: dict[str, LoadedFamily]
    file_sha256: str
    overrides: tuple[Override, ...] = ()

    @property
    def notices(self) -> list[str]:
        """What loading noticed and accepted (an old spelling), for the CLI to print."""
        return [family.notice for family in self.families.values() if family.notice]

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    def resolve(self, path: Path) -> Path:
        return path if path.is_absolute() else (self.base_dir / path).resolve()

    def output_dir(self, given: Path | str | None = None) -> Path:
        """Where this plan's windows go: ``given`` (a --out or output_dir override), else window.output_dir."""
        if not given:
            return self.resolve(self.plan.window.output_dir)
        problem = kernel_filesystem_problem(Path(given).absolute())
        if problem is not None:
            raise OutputDirError(f"--out {given}: {problem}")
        return Path(given)


def _hint(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind == "missing":
        return "add this key"
    if kind == "extra_forbidden":
        return "remove this key or fix its spelling"
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return f"give a value of the right type (got {error.get('input')!r})"
    return "fix this value"


def _optional_inside(annotation: Any) -> Any:
    """``X | None`` -> ``X``; any other annotation as it is."""
    while get_origin(annotation) in (Union, UnionType):
        annotation = next(a for a in get_args(annotation) if a is not type(None))
    return annotation


def _keys_at(location: Sequence[int | str]) -> list[str]:
    """The keys the plan's model accepts beside the last part of ``location`` (a table's fields); [] if unknown.

    Walked by hand through the models' annotations: pydantic names the offending key but not its neighbours."""
    current: Any = Plan
    for part in location[:-1]:
        current = _optional_inside(current)
        if get_origin(current) in (dict, list):
            current = get_args(current)[-1]  # a named table (roles.A) or a list item: the value's model
        elif isinstance(current, type) and issubclass(current, BaseModel) and part in current.model_fields:
            current = current.model_fields[str(part)].annotation
        else:
            return []
    current = _optional_inside(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [field.alias or name for name, field in current.model_fields.items()]
    return []


def _validation_error(path: Path, exc: ValidationError) -> PlanError:
    """One line naming the first problem (its key, what is wrong, how to fix it); the others for ``fairwin -v``."""
    errors = exc.errors()
    # A misspelt key is both an unknown key and a missing one: name the unknown one, with its nearest neighbour.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    location = _location(first)
    message, hint = first["msg"].removeprefix("Value error, "), _hint(first)
    if first["type"] == "missing" and first["loc"]:
        message = f"{str(first['loc'][-1])!r} is required here"
    if first["type"] == "extra_forbidden" and first["loc"]:
        key = str(first["loc"][-1])
        message = f"{key!r} is not a key here"
        near = get_close_matches(key, _keys_at(first["loc"]), n=1)
        hint = f"did you mean {near[0]!r}?" if near else "remove it or fix its spelling (docs/plan.md lists the keys)"
    others = [f"{_location(e)}: {e['msg'].removeprefix('Value error, ')}" for e in errors if e is not first]
    return PlanError(f"{path}: {location}: {message}; {hint}{more(others)}", details=others)


def _location(error: ErrorDetails) -> str:
    return ".".join(str(part) for part in error["loc"]) or "(top level)"


def _read_toml(path: Path) -> tuple[bytes, dict[str, Any]]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise PlanError(f"{path}: no such plan file; check the path") from None
    except OSError as exc:
        raise PlanError(f"{path}: cannot read plan: {exc.strerror}") from None
    try:
        return raw, tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise PlanError(f"{path}: not UTF-8 text; save the plan as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"{path}: invalid TOML: {exc}; fix the syntax there") from None
    except RecursionError:
        raise PlanError(f"{path}: nested far deeper than any plan; is it the plan file?") from None


def _validated(path: Path, data: dict[str, Any]) -> Plan:
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(path, exc) from None


def parse_plan(path: Path, overrides: Sequence[Override] = ()) -> tuple[bytes, Plan]:
    """Read and validate the TOML, with these overrides applied in order; no other file is opened."""
    raw, data = _read_toml(path)
    apply_overrides(data, overrides)
    return raw, _validated(path, data)


def parse_window_plan(window: WindowDir) -> Plan:
    """The plan a window ran: its copy of the plan file with the overrides its window.json recorded."""
    manifest = read_record(window.manifest, WindowManifest)
    changes = [Override.recorded(c.key, c.value, c.variable) for c in manifest.plan_overrides]
    return parse_plan(window.plan_copy, changes)[1]


def read_prompts(path: Path, key: str) -> dict[str, Prompt]:
    """A prompts file (one JSON object with 'id' and 'text' a line, ids unique), by id; ``key`` names it in errors."""
    prompts: dict[str, Prompt] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise PlanError(f"{key}: prompts file {path} does not exist; build it with `fairwin prompts`") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row: Any = json.loads(line)
            prompt = Prompt(id=str(row["id"]), text=str(row["text"]))
        except (json.JSONDecodeError, KeyError, TypeError, RecursionError):
            raise PlanError(
                f"{path}:{number}: not a JSON object with 'id' and 'text'; each line must be one prompt"
            ) from None
        if prompt.id in prompts:
            raise PlanError(f"{path}:{number}: duplicate prompt id {prompt.id!r}; ids must be unique")
        prompts[prompt.id] = prompt
    if not prompts:
        raise PlanError(f"{path}: no prompts; a family needs at least one")
    return prompts


def _load_family(loaded_path: Path, base: Path, name: str, family: Family) -> LoadedFamily:
    key = f"{loaded_path}: families.{name}"
    order_path = family.order if family.order.is_absolute() else base / family.order
    prompts_path = family.prompts if family.prompts.is_absolute() else base / family.prompts
    if not order_path.is_file():
        raise PlanError(f"{key}.order: {order_path} does not exist; build it with `fairwin prompts`")
    order_sha = sha256_file(order_path)
    if order_sha != family.order_sha256:
        raise PinMismatchError(
            f"{key}.order_sha256: {order_path} has sha256 {order_sha}, the plan pins {family.order_sha256}; "
            "the frozen order changed: restore it, or pin the new one deliberately"
        )
    prompts = read_prompts(prompts_path, f"{key}.prompts")
    prompts_sha = sha256_bytes(prompts_path.read_bytes())
    if family.prompts_sha256 is not None and prompts_sha != family.prompts_sha256:
        raise PinMismatchError(
            f"{key}.prompts_sha256: {prompts_path} has sha256 {prompts_sha}, the plan pins "
            f"{family.prompts_sha256}; restore the prompts, or pin the new file deliberately"
        )
    ids, notice = read_order(order_path, name)
    missing = [pid for pid in ids if pid not in prompts]
    if missing:
        raise PlanError(f"{order_path}: ids not in {prompts_path}: {', '.join(missing[:5])}")
    return LoadedFamily(
        name=name,
        ordered=tuple(prompts[pid] for pid in ids),
        prompts_sha256=prompts_sha,
        order_sha256=order_sha,
        notice=notice,
    )


def _effective_sha256(file_sha256: str, changes: Sequence[Override]) -> str:
    """The file's own sha256 when nothing overrides it; else the digest of the file's and every change."""
    if not changes:
        return file_sha256
    body = {"plan_file_sha256": file_sha256, "overrides": [[change.key, change.value] for change in changes]}
    return sha256_bytes(canonical_json(body).encode("utf-8"))


def load_plan(path: Path | str, overrides: Sequence[str] = ()) -> LoadedPlan:
    """Load a plan (with ``--set KEY=VALUE`` overrides and its pins' ``{env:NAME}`` resolved), check every
    reference and every pinned sha256."""
    path = Path(path)
    changes = [parse_override(text) for text in overrides]
    raw, data = _read_toml(path)
    apply_overrides(data, changes)
    # Each pin read from a variable is recorded as the value it held: the window pins what the host must be.
    changes += resolve_pin_variables(data)
    plan = _validated(path, data)
    refuse_literal_secrets(plan, path)
    declare([*plan.secrets.names, *plan.secrets.flags], plan.secrets.public)
    base = path.resolve().parent
    families = {name: _load_family(path, base, name, fam) for name, fam in plan.families.items()}
    file_sha256 = sha256_bytes(raw)
    return LoadedPlan(
        path=path.resolve(),
        raw=raw,
        sha256=_effective_sha256(file_sha256, changes),
        plan=plan,
        families=families,
        file_sha256=file_sha256,
        overrides=tuple(changes),
    )
