"""Runtime checks at every start: the environment and the speculative configuration are the declared ones.

The environment is read back from the running server (``/proc/PID/environ``), so a
wrapper that changes it (``env X=1 python ...``, a shell script that exports) is
caught. A role derived from a base role (production's policy on the experiment's
runtime) may differ from its base only in the keys it declares as allowed.

The speculative configuration is read from the launch arguments: vLLM's
``--speculative-config JSON`` and ``fairwin sim``'s ``--spec-tokens``. With
``runtime.standard_verification``, vLLM's ``rejection_sample_method`` must be
absent or ``"standard"``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from fairwin.errors import GateRefused, PlanError, RuntimeCheckError
from fairwin.launch.spec import LaunchSpec
from fairwin.plan.roles import RepoPin

SPEC_FLAGS = ("--speculative-config", "--speculative_config")
STANDARD = "standard"
SHOWN = 5


def env_differences(expected: Mapping[str, str], actual: Mapping[str, str]) -> list[str]:
    return sorted(k for k in expected.keys() | actual.keys() if expected.get(k) != actual.get(k))


def _listed(keys: Sequence[str]) -> str:
    more = f" (+{len(keys) - SHOWN} more)" if len(keys) > SHOWN else ""
    return ", ".join(keys[:SHOWN]) + more


def check_declared_env(spec: LaunchSpec) -> None:
    """A derived role may differ from its base only in its allowed keys (static: before anything starts)."""
    if spec.base_env is None:
        return
    extra = [k for k in env_differences(spec.base_env, spec.env) if k not in spec.allowed_env_differences]
    if extra:
        raise GateRefused(
            f"role {spec.role_name}: its environment differs from base role {spec.base_role} in {_listed(extra)}, "
            "which allowed_env_differences does not list; declare them or stop changing them"
        )


def check_running_env(
    spec: LaunchSpec, actual: Mapping[str, str] | None, expected: Mapping[str, str] | None = None
) -> list[str]:
    """Compare the server's real environment with the one it should have (``expected``, by default the spec's
    effective env); returns notes, raises on a difference."""
    if actual is None:
        return ["environment not checked: this system does not expose /proc/PID/environ"]
    changed = env_differences(spec.env if expected is None else expected, actual)
    if changed:
        raise RuntimeCheckError(
            f"{spec.label}: the running server's environment differs from the declared one in "
            f"{_listed(changed)}; something between fairwin and the server changed it (a wrapper script?)"
        )
    if spec.base_env is not None:
        allowed = set(spec.allowed_env_differences)
        beyond = [k for k in env_differences(spec.base_env, actual) if k not in allowed]
        if beyond:
            raise RuntimeCheckError(
                f"role {spec.role_name}: the running server differs from base role {spec.base_role} in "
                f"{_listed(beyond)}, beyond its allowed differences"
            )
    return []


def effective_speculative(argv: Sequence[str]) -> dict[str, Any]:
    """The speculative config the launch arguments ask for; {} for none."""
    for index, arg in enumerate(argv):
        name, eq, inline = arg.partition("=")
        if name in SPEC_FLAGS:
            value = inline if eq else (argv[index + 1] if index + 1 < len(argv) else "")
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError:
                raise PlanError(f"a role's argv: {name} is not JSON: {value!r}") from None
            if not isinstance(parsed, dict):
                raise PlanError(f"a role's argv: {name} must be a JSON object, got {value!r}")
            return parsed
        if name == "--spec-tokens":  # fairwin sim
            value = inline if eq else (argv[index + 1] if index + 1 < len(argv) else "0")
            if not value.strip().isdigit():
                raise PlanError(f"a role's argv: --spec-tokens must be a whole number of draft tokens, got {value!r}")
            tokens = int(value)
            return {"method": "sim", "num_speculative_tokens": tokens} if tokens > 0 else {}
    return {}


def check_speculative(
    role_name: str, declared: Mapping[str, Any] | None, argv: Sequence[str], standard: bool
) -> dict[str, Any]:
    """Refuse a start whose speculative config is not the declared one, or not standard when required."""
    effective = effective_speculative(argv)
    if declared is not None:
        for key in sorted(declared.keys() | effective.keys()):
            if declared.get(key) != effective.get(key):
                raise GateRefused(
                    f"role {role_name}: speculative config field {key!r} is {effective.get(key)!r} at launch, "
                    f"the role declares {declared.get(key)!r}"
                )
    method = effective.get("rejection_sample_method", STANDARD)
    if standard and effective and method != STANDARD:
        raise GateRefused(
            f"role {role_name}: speculative config uses rejection_sample_method {method!r}; the plan requires "
            "standard verification (runtime.standard_verification)"
        )
    return effective


def check_checkout(label: str, pin: RepoPin, head: str | None, changed: list[str]) -> dict[str, str]:
    """The pinned checkout is at its commit with nothing tracked uncommitted; raises naming what is there."""
    if head is None:
        raise RuntimeCheckError(f"{label}: {pin.path} is not a git checkout there (or git is missing)")
    if not head.startswith(pin.commit):
        raise RuntimeCheckError(f"{label}: {pin.path} is at {head[:12]}, not the pinned {pin.commit[:12]}; bring it "
                                "there first (`fairwin stage`, or git checkout on the host)")  # fmt: skip
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        raise RuntimeCheckError(f"{label}: {pin.path} is at {head[:12]} but has uncommitted changes "
                                f"({', '.join(changed[:3])}{more})")  # fmt: skip
    return {"path": pin.path, "commit": head}


def check_identity(label: str, pins: Mapping[str, str], found: Mapping[str, str | None]) -> dict[str, str]:
    """Every pinned file has its pinned sha256 on the process's host; raises naming the first that does not."""
    for path, pinned in pins.items():
        actual = found.get(path)
        if actual is None:
            raise RuntimeCheckError(f"{label}: identity pin {path} does not exist there")
        if actual != pinned:
            raise RuntimeCheckError(
                f"{label}: {path} has sha256 {actual[:16]}..., not the pinned {pinned[:16]}...; "
                "the worker is not the one the plan was qualified with"
            )
    return dict(pins)
