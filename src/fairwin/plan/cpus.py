"""CPU lists as the kernel writes them ('0-2,5'): the plan's ``cpus`` and ``window.client_cpus``."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

CPU_LIST = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


def parse_cpu_list(text: str) -> set[int]:
    """'0-2,5' -> {0, 1, 2, 5}; ValueError when it is not a CPU list."""
    if not CPU_LIST.match(text):
        raise ValueError(f"{text!r} is not a CPU list such as '0', '0-3' or '0,2'")
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def _cpu_list(value: str) -> str:
    parse_cpu_list(value)  # ValueError names what a CPU list looks like
    return value


#: A plan value that must be a CPU list.
CpuList = Annotated[str, AfterValidator(_cpu_list)]
