"""How long the client's event loop waited for a CPU: the kernel's own account.

A stream is timed by the client's event loop. When the loop's thread is runnable
but not running (the server's processes hold every core), bytes wait in the socket
and a whole stream can be read in one burst at its end: time to first token inflated,
decode time collapsed. Linux counts that wait per thread in
``/proc/thread-self/schedstat`` (second field: nanoseconds spent waiting on a run
queue), so the client can say exactly when it could not see. No library exposes
this counter (psutil reports CPU times, not run-queue delay), hence the few lines here.
"""

from __future__ import annotations

from pathlib import Path

SCHEDSTAT = Path("/proc/thread-self/schedstat")


def runqueue_wait_s() -> float | None:
    """Seconds this thread has waited on a run queue since it started; None where the kernel does not say."""
    try:
        fields = SCHEDSTAT.read_text().split()
        return int(fields[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


class RunqueueClock:
    """Run-queue wait of the calling thread between construction and :meth:`elapsed`."""

    def __init__(self) -> None:
        self.start = runqueue_wait_s()

    def elapsed(self) -> float | None:
        end = runqueue_wait_s()
        if self.start is None or end is None:
            return None
        return end - self.start
