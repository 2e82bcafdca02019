"""Ways a stored file gets damaged: torn, flipped, edited, from the future, emptied, replaced by a directory."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _first_object(path: Path) -> tuple[dict[str, Any], Callable[[dict[str, Any]], None]]:
    """The file's (first) JSON object, and how to write it back in place."""
    if path.suffix == ".jsonl":
        lines = path.read_text().splitlines()
        row = json.loads(lines[0])
        return row, lambda new: path.write_text("\n".join([json.dumps(new), *lines[1:]]) + "\n")
    return json.loads(path.read_text()), lambda new: path.write_text(json.dumps(new))


def truncate(path: Path) -> None:
    """Cut at half, inside a line: a JSONL cut exactly after a newline is a shorter file, not a torn one."""
    data = path.read_bytes()
    cut = len(data) // 2
    if data[cut - 1 : cut] == b"\n":
        cut -= 1
    path.write_bytes(data[:cut])


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle] ^= 0x01
    path.write_bytes(bytes(data))


def drop_a_field(path: Path) -> None:
    value, write = _first_object(path)
    value.pop(sorted(value)[-1])
    write(value)


def unknown_format(path: Path) -> None:
    value, write = _first_object(path)
    write({**value, "format": "fairwin.from-the-future/99"})


def empty(path: Path) -> None:
    path.write_bytes(b"")


def directory_in_place(path: Path) -> None:
    path.unlink()
    path.mkdir()


DAMAGE = (truncate, flip_a_byte, drop_a_field, unknown_format, empty, directory_in_place)


def drop_the_seal(path: Path) -> None:
    value, write = _first_object(path)
    value.pop("sha256")
    write(value)
