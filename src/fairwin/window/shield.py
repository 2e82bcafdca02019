"""Awaiting something to its end however often the waiter is cancelled: a window's close gives production back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


async def to_the_end(work: Coroutine[Any, Any, None], on_cancel: Callable[[], None]) -> None:
    """Run ``work`` to completion. A cancellation of the caller meanwhile (a second Ctrl-C, SIGTERM or SIGHUP)
    is absorbed (``uncancel``) and reported through ``on_cancel``; ``work``'s own exception is raised."""
    running = asyncio.ensure_future(work)
    while True:
        try:
            await asyncio.shield(running)
            return
        except asyncio.CancelledError:
            if running.done():
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            on_cancel()
