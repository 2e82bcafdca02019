"""Ports the tests fix (in their plans, for their sshd and PostgreSQL servers): each xdist worker its own.

fairwin draws a role's ``"auto"`` port from 20000 up to the kernel's ephemeral range (launch/spec.py's
``free_port``), and the kernel hands out the ephemeral range itself (to every outgoing connection and every bind
to port 0). The ports a test fixes come from below both, 10000 to 19999, in a block of its own per worker, taken in
turn: a port one test fixed and left unbound for a while (production down between chained windows) is never
another worker's, nor a role's auto port, nor a connection's.
"""

from __future__ import annotations

import itertools
import os
import socket

LOWEST, HIGHEST = 10000, 19999


def _block() -> range:
    """This worker's ports: the whole range outside xdist, else one slice of it per worker."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or count <= 1:
        return range(LOWEST, HIGHEST + 1)
    size = (HIGHEST + 1 - LOWEST) // count
    start = LOWEST + int(worker[2:]) * size
    return range(start, start + size)


_TURN = itertools.cycle(_block())


def free_port() -> int:
    """The worker's next port that is free here now."""
    for port in itertools.islice(_TURN, len(_block())):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"every port of this worker's block {_block()} is taken")
