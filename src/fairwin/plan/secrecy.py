"""The rule that a plan never holds a secret's value (its ``[secrets]`` section adds names and flags).

A plan is copied into every window and hashed into receipts, so a key written in it
would be everywhere. A value in a secret position (an env variable whose name says
secret, the argument after a flag such as ``--api-key``, a URL's password) must be
``{env:NAME}`` placeholders only, or come from an env file; anything else is refused
at load, before a directory is made.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from fairwin.errors import PlanError
from fairwin.plan.models import Plan
from fairwin.plan.secrets import SecretsSettings
from fairwin.redaction import is_flag, is_secret_flag, is_secret_name, only_placeholders, url_passwords


def _argv_findings(where: str, argv: list[str], settings: SecretsSettings) -> Iterator[str]:
    for index, arg in enumerate(argv):
        flag, sep, inline = arg.partition("=")
        if is_secret_flag(arg, settings.flags, settings.public):
            value = inline if sep else (argv[index + 1] if index + 1 < len(argv) else "")
            if not sep and is_flag(value):
                value = ""  # a switch: the next argument is a flag of its own
            if not only_placeholders(value):
                yield (
                    f"{where}[{index}] passes {flag} a literal secret; write {flag} {{env:NAME}} and export "
                    f"NAME before running (if {flag} takes no secret, list it in [secrets] public)"
                )
        yield from _url_findings(f"{where}[{index}]", arg)


def _url_findings(where: str, value: str) -> Iterator[str]:
    if any(not only_placeholders(password) for password in url_passwords(value)):
        yield f"{where} holds a URL with a password; write the password as {{env:NAME}} and export NAME"


def _env_findings(where: str, env: dict[str, str], settings: SecretsSettings) -> Iterator[str]:
    for name, value in env.items():
        if is_secret_name(name, settings.names, settings.public) and not only_placeholders(value):
            yield (
                f'{where}.{name} holds a literal secret; write {name} = "{{env:{name}}}" and export it, '
                f"or move it to an env file (env_files); if {name} is no secret, "
                "list it in [secrets] public"
            )
        else:
            yield from _url_findings(f"{where}.{name}", value)


def findings(plan: Plan) -> list[str]:
    """Every place a plan holds a secret's value, in plan order."""
    settings = plan.secrets
    found: list[str] = []
    for name, role in plan.roles.items():
        found += _argv_findings(f"roles.{name}.argv", role.argv, settings)
        found += _env_findings(f"roles.{name}.env", role.env, settings)
        found += _url_findings(f"roles.{name}.base_url", role.base_url)
        for number, worker in enumerate(role.workers):
            found += _argv_findings(f"roles.{name}.workers[{number}].argv", worker.argv, settings)
            found += _env_findings(f"roles.{name}.workers[{number}].env", worker.env, settings)
    if plan.production is not None:
        found += _argv_findings("production.up", plan.production.up, settings)
        found += _argv_findings("production.down", plan.production.down, settings)
        found += _url_findings("production.base_url", plan.production.base_url or "")
    found += _url_findings("rehearsal.url", plan.rehearsal.url or "")
    if plan.window.archive and url_passwords(plan.window.archive):
        found.append(
            "window.archive holds a database password; give it in PGPASSWORD or ~/.pgpass, "
            "or the whole URL in FAIRWIN_ARCHIVE_URL"
        )
    return found


def refuse_literal_secrets(plan: Plan, path: Path) -> None:
    """Raise PlanError naming the first literal secret (and how many more there are)."""
    found = findings(plan)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise PlanError(f"{path}: {found[0]}{more}; a plan is copied into every window and must hold no secret")


__all__ = ["SecretsSettings", "findings", "refuse_literal_secrets"]
