"""Durable files: atomic writes, locked and fsynced appends, sha256.

Nothing fairwin records may be half-written: a reader sees either the old file or
the new one (temp file in the same directory, fsync, rename, fsync the directory),
and an appended JSONL line is whole or absent (``flock`` against concurrent
writers, one ``write`` per line, fsync before unlocking).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from fairwin.errors import CorruptRecordError, InputError, OutputDirError
from fairwin.redaction import scrub_bytes


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace: the form whose sha256 identifies a document."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    data = scrub_bytes(data)  # a resolved secret never reaches a file, whatever path it took to get here
    if path.is_dir():
        raise OutputDirError(f"{path} is a directory; name the file to write in it")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except (FileNotFoundError, NotADirectoryError):
        raise OutputDirError(f"{path.parent}: no such directory to write {path.name} in; create it first") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_text_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    write_bytes_atomic(path, text.encode("utf-8"), mode)


def write_json_atomic(path: Path, value: Any) -> None:
    write_text_atomic(path, json.dumps(_jsonable(value), indent=2, sort_keys=True) + "\n")


def write_jsonl_atomic(path: Path, rows: Iterable[Any]) -> None:
    write_text_atomic(path, "".join(json.dumps(_jsonable(row), sort_keys=True) + "\n" for row in rows))


def append_jsonl(path: Path, rows: Iterable[Any]) -> None:
    """Append whole lines under an exclusive lock, fsynced before the lock is released.

    If a crashed writer left a torn last line (no newline), it is closed off first so
    it stays a line of its own that readers report, and never rewritten or glued to
    the new row.
    """
    payload = jsonl_bytes(rows)
    if payload:
        append_locked(path, lambda _: payload, read=False)


def jsonl_bytes(rows: Iterable[Any]) -> bytes:
    return "".join(json.dumps(_jsonable(row), sort_keys=True) + "\n" for row in rows).encode("utf-8")


def append_locked(path: Path, payload_for: Callable[[bytes], bytes], *, read: bool = True) -> None:
    """Append what ``payload_for`` returns, given the file as it is under the lock (``b""`` unless ``read``),
    so a writer can decide from what is already there; fsynced before the lock is released."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(fd).st_size
            payload = scrub_bytes(payload_for(_read_all(fd, size) if read else b""))
            if not payload:
                return
            if size and os.pread(fd, 1, size - 1) != b"\n":
                payload = b"\n" + payload
            os.write(fd, payload)
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _read_all(fd: int, size: int) -> bytes:
    chunks, offset = [], 0
    while offset < size:
        chunk = os.pread(fd, size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def scan_jsonl(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every whole JSON-object line, and a problem for each line that is not one (torn or corrupt)."""
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except IsADirectoryError:
        raise CorruptRecordError(f"{path} is a directory, not the file fairwin wrote there") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, RecursionError):  # nested past any record fairwin writes
                row = None
            if not isinstance(row, dict):
                torn = (
                    "torn line (no newline: a writer was interrupted)"
                    if not line.endswith("\n")
                    else "torn or corrupt line (not a whole JSON object)"
                )
                problems.append(f"{path}:{number}: {torn}; left in place, not used")
                continue
            if not line.endswith("\n"):
                problems.append(f"{path}:{number}: last line has no newline (a writer may have been interrupted)")
            rows.append(row)
    return rows, problems


def _check_format(path: Path, where: str, value: dict[str, Any], formats: tuple[str, ...]) -> None:
    found = value.get("format")
    if found not in formats:
        raise CorruptRecordError(
            f"{where}: format {found!r}; this fairwin reads {', '.join(formats)} (a newer fairwin wrote it, or it "
            "is not the file fairwin wrote there)"
        )


def read_jsonl(path: Path, formats: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """A JSONL file fairwin wrote, every line whole; with ``formats``, every row one of them.

    A torn or corrupt line, a directory in the file's place or a format not in ``formats``
    raises :class:`CorruptRecordError` naming the file and line.
    """
    if not path.exists():
        raise InputError(f"{path} does not exist")
    rows, problems = scan_jsonl(path)
    if problems:
        raise CorruptRecordError(problems[0])
    if formats:
        for number, row in enumerate(rows, 1):
            _check_format(path, f"{path} row {number}", row, formats)
    return rows


def read_json(path: Path, formats: tuple[str, ...] = ()) -> dict[str, Any]:
    """A JSON object fairwin wrote; with ``formats``, its ``format`` must be one of them.

    Missing: :class:`InputError`; a directory, not JSON, not an object or another format:
    :class:`CorruptRecordError`, naming the file.
    """
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise InputError(f"{path} does not exist") from None
    except IsADirectoryError:
        raise CorruptRecordError(f"{path} is a directory, not the file fairwin wrote there") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        what = "empty" if not text.strip() else f"not JSON ({exc.msg} at line {exc.lineno})"
        raise CorruptRecordError(f"{path}: {what}; it is torn or was edited") from None
    except RecursionError:
        raise CorruptRecordError(f"{path}: nested far deeper than any record fairwin writes; not its file") from None
    if not isinstance(value, dict):
        raise CorruptRecordError(f"{path}: not a JSON object; it is not the file fairwin wrote there")
    if formats:
        _check_format(path, str(path), value, formats)
    return value


def json_field(document: Any, dotted: str) -> Any:
    """The value at a dotted path into parsed JSON (``gpu.clock_cap_mhz``): how a plan or a map names a field of
    another tool's record. KeyError when a part is not there."""
    node = document
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def first_problem(exc: ValidationError, whole: str = "(record)") -> str:
    """A validation error as one line: where (``whole`` when it is the whole record), and what."""
    error = exc.errors()[0]
    return f"{'.'.join(str(p) for p in error['loc']) or whole}: {error['msg']}"
