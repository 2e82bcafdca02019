"""Runtime checks at every start: the environment and the speculative configuration are the declared ones.

The environment is read back from the running server (``/proc/PID/environ``), so a
wrapper that changes it (``env X=1 python ...``, a shell script that exports) is
caught. A role derived from a base role (production's policy on the experiment's
runtime) may differ from its base only in the keys it declares as allowed.

The speculative configuration is what the running server reports it runs: its own
``non-default args`` start-up line in its log (so a wrapper script's config is seen); only
where a server reports none is it read from the launch arguments (vLLM's
``--speculative-config JSON``, llama-server's ``--spec-*`` options, ``fairwin sim``'s
``--spec-tokens``), and one that neither states is unobserved: refused unless the plan
accepts it (``runtime.accept_unobserved``). Before the take-down, a role's argv is checked
where it states a config. With ``runtime.standard_verification``, vLLM's
``rejection_sample_method`` must be absent or ``"standard"``, and llama.cpp's
synthetic acceptance (``--spec-synth-len``, ``--spec-synth-rates``) is refused.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from fairwin.directory.declaration import LiveMember
from fairwin.directory.start_receipt import SpeculativeSource
from fairwin.errors import RuntimeCheckError, shortlist
from fairwin.launch.reported import reported_speculative
from fairwin.launch.spec import LaunchSpec
from fairwin.launch.speculative import LLAMA_SYNTHETIC, stated_speculative
from fairwin.plan.checks import Runtime
from fairwin.redaction import fingerprinted, is_secret_name

STANDARD = "standard"
SHOWN = 5
#: How long a start waits for the 'non-default args' line of a server whose log is copied here (a container's
#: ``logs -f``, a remote host's ``tail -F``) when nothing else states its config: the copy can lag its health
#: answer (a container window on a loaded machine read no line yet, and was refused as unobservable).
REPORT_WAIT_S = 5.0
REPORT_POLL_S = 0.05
#: Set by a login session or a shell, or fairwin's own (FAIRWIN_*): never production's configuration.
SESSION_VARIABLES = frozenset(
    {
        "SHLVL",
        "_",
        "PWD",
        "OLDPWD",
        "SSH_CONNECTION",
        "SSH_CLIENT",
        "SSH_TTY",
        "TERM",
        "XDG_SESSION_ID",
        "XDG_SESSION_TYPE",
        "XDG_SESSION_CLASS",
        "MAIL",
        "LS_COLORS",
    }
)


def env_differences(expected: Mapping[str, str], actual: Mapping[str, str]) -> list[str]:
    return sorted(k for k in expected.keys() | actual.keys() if expected.get(k) != actual.get(k))


def _listed(keys: Sequence[str]) -> str:
    return shortlist(keys, SHOWN)


def check_declared_env(spec: LaunchSpec) -> None:
    """A derived role may differ from its base only in its allowed keys (static: before anything starts)."""
    if spec.base_declared_env is None:
        return
    here = spec.base_env is not None  # a role here: whole envs; on a host: the declared variables
    base, own = (spec.base_env, spec.env) if spec.base_env is not None else (spec.base_declared_env, spec.declared_env)
    extra = [k for k in env_differences(base, own) if k not in spec.allowed_env_differences]
    if extra:
        raise RuntimeCheckError(
            f"role {spec.role_name}: its {'environment' if here else 'declared environment'} differs from base "
            f"role {spec.base_role} in {_listed(extra)}, which allowed_env_differences does not list; declare them "
            "or stop changing them"
        )


def base_expected(spec: LaunchSpec, expected: Mapping[str, str]) -> dict[str, str] | None:
    """The whole environment the base role would run with where this process runs: here, the spec's; on a host,
    that host's part of what this process was given, then the base's declared variables."""
    if spec.base_env is not None or spec.base_declared_env is None:
        return spec.base_env
    return {**{k: v for k, v in expected.items() if k not in spec.declared_env}, **spec.base_declared_env}


def check_running_env(
    spec: LaunchSpec,
    actual: Mapping[str, str] | None,
    expected: Mapping[str, str] | None = None,
    against_base: bool = True,
) -> list[str]:
    """Compare the server's real environment with the one it should have (``expected``, by default the spec's
    effective env), and a derived role's with its base's (unless ``against_base`` is off: compared with
    production's live process instead); returns notes, raises on a difference."""
    if actual is None:
        return ["environment not checked: this system does not expose /proc/PID/environ"]
    whole = spec.env if expected is None else expected
    changed = env_differences(whole, actual)
    if changed:
        raise RuntimeCheckError(
            f"{spec.label}: the running server's environment differs from the declared one in "
            f"{_listed(changed)}; something between fairwin and the server changed it (a wrapper script?)"
        )
    if against_base and (base := base_expected(spec, whole)) is not None:
        allowed = set(spec.allowed_env_differences)
        beyond = [k for k in env_differences(base, actual) if k not in allowed]
        if beyond:
            raise RuntimeCheckError(
                f"role {spec.role_name}: the running server differs from base role {spec.base_role} in "
                f"{_listed(beyond)}, beyond its allowed differences"
            )
    return []


def _shown(key: str, value: str | None) -> str:
    if value is None:
        return f"no {key}"
    return f"{key}=<a secret, {value[:19]}...>" if is_secret_name(key) else f"{key}={value!r}"


def check_live_env(label: str, live: LiveMember, env: Mapping[str, str], allowed: Sequence[str]) -> None:
    """A process compared with production's live one: the same environment beyond ``allowed`` (a login
    session's own variables and fairwin's FAIRWIN_* aside); raises naming the first key with both values."""
    mine = fingerprinted(env)
    keys = [
        k
        for k in env_differences(live.env, mine)
        if k not in allowed and k not in SESSION_VARIABLES and not k.startswith("FAIRWIN_")
    ]
    if keys:
        first = keys[0]
        raise RuntimeCheckError(
            f"{label}: its environment differs from {live.label} ({live.found_by}) in {_listed(keys)}: production "
            f"runs {_shown(first, live.env.get(first))}, {label} {_shown(first, mine.get(first))}; list the key in "
            "allowed_env_differences if the difference is the experiment"
        )


def check_live_observed(label: str, live: LiveMember, runtime: Runtime) -> bool:
    """Whether production's speculative config was observed (its server's logged line, or its argv); one that
    was not is refused by name, unless the plan accepts it unobserved (then False: nothing to compare)."""
    if live.speculative_source != "unobserved":
        return True
    if "speculative" in runtime.accept_unobserved:
        return False
    raise RuntimeCheckError(
        f"{label}: {live.label}'s speculative config cannot be observed: its server logged no 'non-default args' "
        "line that fairwin could read and its argv states none, so comparing with it would compare nothing; name "
        'its log (production.live.head.log; a container\'s own logs are read), or add "speculative" to '
        "runtime.accept_unobserved"
    )


def check_live_speculative(label: str, live: LiveMember, effective: Mapping[str, Any], runtime: Runtime) -> None:
    """A role compared with production runs production's speculative config, field for field (where production's
    was observed, or accepted unobserved)."""
    if not check_live_observed(label, live, runtime):
        return
    for key in sorted(live.speculative.keys() | effective.keys()):
        if live.speculative.get(key) != effective.get(key):
            raise RuntimeCheckError(
                f"{label}: speculative config field {key!r} is {effective.get(key)!r}; {live.label} runs "
                f"{live.speculative.get(key)!r}"
            )


def check_speculative(
    role_name: str, declared: Mapping[str, Any] | None, argv: Sequence[str], standard: bool
) -> dict[str, JsonValue]:
    """Refuse a role whose launch arguments ask for another speculative config than the declared one, or not the
    standard verification when it is required (RuntimeCheckError; the preflight refuses with it before anything
    starts). Arguments that state none are left to the start, which reads what the server reports."""
    stated = stated_speculative(argv)
    if stated is not None:
        compare_speculative(f"role {role_name}", declared, stated, standard, "at launch")
    return stated or {}


def compare_speculative(
    label: str,
    declared: Mapping[str, Any] | None,
    effective: Mapping[str, Any],
    standard: bool,
    where: str,
) -> None:
    """The effective config (``where`` it was read) is the declared one, and standard when that is required."""
    if declared is not None:
        for key in sorted(declared.keys() | effective.keys()):
            if declared.get(key) != effective.get(key):
                raise RuntimeCheckError(
                    f"{label}: speculative config field {key!r} is {effective.get(key)!r} {where}, "
                    f"the role declares {declared.get(key)!r}"
                )
    method = effective.get("rejection_sample_method", STANDARD)
    if standard and effective and method != STANDARD:
        raise RuntimeCheckError(
            f"{label}: speculative config uses rejection_sample_method {method!r}; the plan requires standard "
            f"verification (runtime.standard_verification), read {where}"
        )
    synthetic = [key for key in LLAMA_SYNTHETIC if key in effective]
    if standard and synthetic:
        raise RuntimeCheckError(
            f"{label}: speculative config sets {', '.join(synthetic)}: llama.cpp's synthetic acceptance, which "
            f"accepts drafts at a set rate without verifying them; the plan requires standard verification "
            f"(runtime.standard_verification), read {where}"
        )


def _log_text(log: Path) -> str:
    return log.read_text(errors="replace") if log.exists() else ""


async def await_reported_config(spec: LaunchSpec, log: Path) -> None:
    """Where the server's log reaches ``log`` a moment after it writes it and its argv states no speculative
    config, wait (``REPORT_WAIT_S`` at most) for its 'non-default args' line. A log written here directly holds
    the line before the server answers its health check."""
    if (spec.container is None and spec.remote is None) or stated_speculative(spec.argv) is not None:
        return
    deadline = time.monotonic() + REPORT_WAIT_S
    while reported_speculative(_log_text(log)) is None and time.monotonic() < deadline:
        await asyncio.sleep(REPORT_POLL_S)


def check_reported_speculative(
    spec: LaunchSpec,
    log: Path,
    declared: Mapping[str, Any] | None,
    runtime: Runtime,
    live: LiveMember | None,
) -> tuple[dict[str, JsonValue] | None, SpeculativeSource]:
    """The speculative config a started server runs, from what it reports (its ``non-default args`` log line),
    else from what its argv states, checked against the declaration, standard verification and production's
    (``live``): (config, where it was read). One that cannot be observed is refused by name, unless the plan
    accepts it unobserved (then (None, "unobserved")).
    """
    reported, where = reported_speculative(_log_text(log)), "as the server reports it"
    if reported is None:
        reported, where = stated_speculative(spec.argv), "in its argv"
    if reported is None:
        if "speculative" in runtime.accept_unobserved:
            return None, "unobserved"
        raise RuntimeCheckError(
            f"{spec.label}: its speculative config cannot be observed: its log ({log}) has no 'non-default args' "
            "line and its argv states none, so 'the declared config', 'standard verification' and 'production's "
            'config\' would compare nothing; add "speculative" to runtime.accept_unobserved to run without them'
        )
    compare_speculative(spec.label, declared, reported, runtime.standard_verification, where)
    if live is not None:
        check_live_speculative(spec.label, live, reported, runtime)
    return reported, "server log" if where.startswith("as the server") else "argv"


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
