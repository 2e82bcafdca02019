"""Secrets: which names, flags and URL parts hold one, and the resolved values kept out of every file.

A plan never holds a secret itself (``plan.secrecy`` refuses a literal one): it names where
the value comes from, ``{env:NAME}`` or an env file. Receipts record the plan's words, not
the values. As a second line, every value resolved into a secret position is remembered
here, in memory only, and :func:`scrub` replaces it in whatever fairwin writes (the durable
layer calls it on every file and appended line; a server's own log is scrubbed in place
after the server stops, since the server, not fairwin, writes it).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from fairwin.errors import InputError

#: Parts that mark a secret wherever they stand: AWS_SECRET_ACCESS_KEY, DB_PASSWORD_URL, client_secret.
STRONG_PARTS = ("SECRET", "SECRETS", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "APIKEY")
#: Endings of a single word that mark one as well: PGPASSWORD, CLIENTSECRET, OPENAIAPIKEY.
STRONG_ENDINGS = ("PASSWORD", "PASSWD", "SECRET", "APIKEY")
#: Parts that mark a secret only as the name's last word (HF_TOKEN, --api-key, GITHUBTOKEN): in other places
#: they are settings about keys and tokens (--return-tokens-as-token-ids, KEY_ORDER).
LAST_PARTS = ("KEY", "KEYS", "TOKEN")
LAST_ENDINGS = ("TOKEN",)
#: With this word before the last, the name is a rate, not a secret: --ms-per-draft-token, COST_PER_TOKEN.
RATE_MARK = "PER"
#: A last part that makes the name a location, not a secret: SSL_KEY_FILE, --ssl-keyfile, KEY_DIR.
LOCATION_PARTS = ("FILE", "FILES", "PATH", "DIR", "SOCK", "KEYFILE")
#: ``scheme://user:password@`` (the password group is what is hidden).
URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@\"',]*:)(?P<password>[^@\s/\"',]+)(?P<tail>@)")
ENV_PLACEHOLDER = re.compile(r"\{env:[A-Za-z_][A-Za-z0-9_]*\}")
HIDDEN = "***"
#: Shorter values are not remembered: scrubbing "1" or "true" from every file would ruin them.
MIN_SECRET_CHARS = 6


class _Declared:
    """The loaded plan's ``[secrets]`` names and flags (added at load; a process measures one plan)."""

    extra: frozenset[str] = frozenset()
    public: frozenset[str] = frozenset()


def declare(extra: Iterable[str], public: Iterable[str]) -> None:
    """Make a plan's own secret names and flags (and its public exceptions) count everywhere in this process."""
    _Declared.extra = _Declared.extra | {e.lstrip("-") for e in extra}
    _Declared.public = _Declared.public | {p.lstrip("-") for p in public}


def _parts(name: str) -> list[str]:
    return [part for part in re.split(r"[^A-Za-z0-9]+", name.upper()) if part]


def is_secret_name(name: str, extra: Iterable[str] = (), public: Iterable[str] = ()) -> bool:
    """Whether an environment variable's (or a flag's) name says it holds a secret."""
    bare = name.lstrip("-")
    if bare in _Declared.public or bare in {p.lstrip("-") for p in public}:
        return False
    if bare in _Declared.extra or bare in {e.lstrip("-") for e in extra}:
        return True
    parts = _parts(name)
    if not parts or parts[-1] in LOCATION_PARTS:
        return False
    if any(part in STRONG_PARTS or part.endswith(STRONG_ENDINGS) for part in parts):
        return True
    last = parts[-1]
    return (last in LAST_PARTS or last.endswith(LAST_ENDINGS)) and RATE_MARK not in parts[:-1]


def is_secret_flag(arg: str, extra: Iterable[str] = (), public: Iterable[str] = ()) -> bool:
    """``--api-key``, ``--hf-token``, ``--password`` (the flag alone, before any ``=``)."""
    flag = arg.split("=", 1)[0]
    return flag.startswith("-") and is_secret_name(flag, extra, public)


def is_flag(arg: str) -> bool:
    """``--port``: after a secret flag, such an argument means the flag took no value (a switch)."""
    return re.match(r"--[A-Za-z]", arg) is not None


def only_placeholders(value: str) -> bool:
    """Whether a value is nothing but ``{env:NAME}`` placeholders (or empty): it names a secret's source."""
    return not ENV_PLACEHOLDER.sub("", value).strip()


def hide_url_passwords(text: str) -> str:
    return URL_PASSWORD.sub(lambda m: m["head"] + HIDDEN + m["tail"], text)


def url_passwords(text: str) -> list[str]:
    return [match["password"] for match in URL_PASSWORD.finditer(text)]


def redact_argv(argv: list[str], extra: Iterable[str] = (), public: Iterable[str] = ()) -> list[str]:
    """Values after secret flags become ``***`` (``--api-key X`` and ``--api-key=X``) unless they are ``{env:NAME}``
    placeholders; URLs lose passwords."""
    extra, public = tuple(extra), tuple(public)
    shown: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next and not is_flag(arg):  # a placeholder names the secret's source: a receipt should say it
            shown.append(arg if only_placeholders(arg) else HIDDEN)
            hide_next = False
            continue
        hide_next = False
        if is_secret_flag(arg, extra, public):
            flag, sep, value = arg.partition("=")
            shown.append(f"{flag}={value if only_placeholders(value) else HIDDEN}" if sep else arg)
            hide_next = not sep
        else:
            shown.append(hide_url_passwords(arg))
    return shown


def argv_matches(recorded: list[str], actual: list[str]) -> bool:
    """Whether a live command line is the one a receipt recorded: ``{env:NAME}`` and ``***`` there stand for
    any value (the receipt never held the value itself)."""
    if len(recorded) != len(actual):
        return False
    for written, real in zip(recorded, actual, strict=True):
        if written == real:
            continue
        pieces = re.split(r"\{env:[A-Za-z_][A-Za-z0-9_]*\}|\*\*\*", written)
        if len(pieces) == 1 or not re.fullmatch(".*".join(re.escape(p) for p in pieces), real, re.DOTALL):
            return False
    return True


class _Remembered:
    """The resolved secrets of this process, longest first (one that contains another is replaced whole)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: list[str] = []
        self._pattern: re.Pattern[str] | None = None

    def add(self, value: str | None) -> None:
        if value is None or len(value) < MIN_SECRET_CHARS:
            return
        with self._lock:
            if value not in self._values:
                self._values = sorted([*self._values, value], key=len, reverse=True)
                self._pattern = re.compile("|".join(re.escape(v) for v in self._values))

    def values(self) -> list[str]:
        return self._values

    def clear(self) -> None:
        with self._lock:
            self._values, self._pattern = [], None

    def scrub(self, text: str) -> str:
        pattern = self._pattern
        return text if pattern is None else pattern.sub(lambda m: "*" * len(m.group(0)), text)


_REMEMBERED = _Remembered()


def remember(*values: str | None) -> None:
    """Keep a resolved secret (in memory only) so that no file fairwin writes will hold it."""
    for value in values:
        _REMEMBERED.add(value)
        if value:
            for password in url_passwords(value):
                _REMEMBERED.add(password)


def secret_from_env(variable: str, where: str) -> str:
    """The secret in the environment variable a setting names (``where``: the setting, for the one-line error
    when it is unset), remembered so that no file fairwin writes will hold it."""
    value = os.environ.get(variable)
    if not value:
        raise InputError(f"{where} = {variable!r}, but {variable} is not set; export it and run again")
    remember(value)
    return value


def forget_all() -> None:
    """For tests: this process's remembered secrets and declared names dropped."""
    _REMEMBERED.clear()
    _Declared.extra = _Declared.public = frozenset()


def scrub(text: str) -> str:
    """``text`` with every remembered secret replaced by as many ``*``."""
    return _REMEMBERED.scrub(text)


def scrub_bytes(data: bytes) -> bytes:
    if not _REMEMBERED.values():
        return data  # the common case: nothing was resolved into a secret position
    return scrub(data.decode("utf-8", errors="surrogateescape")).encode("utf-8", errors="surrogateescape")


class ScrubbingFormatter(logging.Formatter):
    """A log line (the window's http-errors.log, stderr with -v) with remembered secrets hidden."""

    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record))


def scrub_file(path: Path) -> bool:
    """Replace remembered secrets in a file someone else writes (a server's log), in place and byte for byte
    the same length, so a process still appending to it is undisturbed. Returns whether anything was hidden."""
    values = [v.encode() for v in _REMEMBERED.values()]
    if not values or not path.is_file():
        return False
    with path.open("r+b") as handle:
        data = hidden = handle.read()
        for value in values:  # bytes, not text: the length must not change even for non-ASCII secrets
            hidden = hidden.replace(value, b"*" * len(value))
        if hidden == data:
            return False
        handle.seek(0)
        handle.write(hidden)
    return True


__all__ = [
    "ScrubbingFormatter",
    "argv_matches",
    "declare",
    "forget_all",
    "hide_url_passwords",
    "is_flag",
    "is_secret_flag",
    "is_secret_name",
    "only_placeholders",
    "redact_argv",
    "remember",
    "scrub",
    "scrub_bytes",
    "scrub_file",
    "secret_from_env",
]


def fingerprint(key: str, value: str) -> str:
    """A variable's value as readings and receipts keep it: a secret's (or a URL password's) as its sha256."""
    if is_secret_name(key) or url_passwords(value):
        return "sha256:" + hashlib.sha256(value.encode()).hexdigest()
    return value


def fingerprinted(env: Mapping[str, str]) -> dict[str, str]:
    return {key: fingerprint(key, value) for key, value in env.items()}
