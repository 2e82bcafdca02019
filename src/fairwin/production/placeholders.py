"""Placeholders: the commands that hold the hardware while a chain leaves production down.

Each runs detached (production/detached.py) so it outlives the window that started it;
what was started (name, pid, argv) goes into the chain's marker, and the next window
proves each still runs its command before it takes them down. A placeholder is proved
running only when it is still alive ``settle_s`` after its start.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from fairwin.errors import ProductionError
from fairwin.launch.listeners import held_here
from fairwin.plan.chain import Placeholder
from fairwin.plan.loading import LoadedPlan
from fairwin.production.detached import command_of, launch_detached
from fairwin.production.proof import pid_alive, stop_group


class Placeholders:
    """The plan's placeholders; ``state_dir`` keeps their pids and logs."""

    def __init__(self, loaded: LoadedPlan, state_dir: Path) -> None:
        self.declared: dict[str, Placeholder] = loaded.plan.chain.placeholders
        self.base_dir = loaded.base_dir
        self.state_dir = state_dir

    async def start(self) -> list[dict[str, Any]]:
        """Start every placeholder and prove each running; any that is not is stopped with the rest, and raised."""
        started: list[dict[str, Any]] = []
        try:
            for name, placeholder in self.declared.items():
                if placeholder.port is not None and (holder := held_here(placeholder.port)) is not None:
                    raise ProductionError(
                        f"placeholder {name}: its port {placeholder.port} here is already held by {holder}"
                    )
                env = {**os.environ, **placeholder.env}
                pid = launch_detached(
                    placeholder.argv, env=env, cwd=self.base_dir, state_dir=self.state_dir, name=f"placeholder-{name}"
                )
                started.append({"name": name, "pid": pid, "argv": placeholder.argv})
            await asyncio.sleep(max((p.settle_s for p in self.declared.values()), default=0.0))
            if problems := not_running(started):
                raise ProductionError(f"placeholders are not holding the hardware: {'; '.join(problems)}")
        except BaseException:
            await self.stop(started)
            raise
        return started

    async def stop(self, started: list[dict[str, Any]]) -> list[str]:
        """Take down every recorded placeholder that still runs its command; what was done, one line each."""
        done = []
        unique = {(record.get("name"), record.get("pid")): record for record in started}
        for record in unique.values():
            pid, name = record.get("pid"), str(record.get("name"))
            if not isinstance(pid, int) or not _runs(record):
                done.append(f"{name}: already gone")
                continue
            grace = self.declared[name].stop_timeout_s if name in self.declared else 10.0
            done.append(f"{name}: stopped pid {pid} ({await stop_group(pid, pid, grace)})")
        return done

    async def stop_all(self, listed: list[dict[str, Any]]) -> list[str]:
        """:meth:`stop` every placeholder listed and every one recorded only by its pid file (a window that died
        while starting them leaves them so): what ends a chain, aborted or recovered."""
        return await self.stop([*listed, *self.recorded()])

    def recorded(self) -> list[dict[str, Any]]:
        """Every declared placeholder whose pid file is in ``state_dir``, as recorded: what a window that died
        while starting them leaves for recovery (whether each still runs is :meth:`stop`'s to check)."""
        found = []
        for name, placeholder in self.declared.items():
            pid_file = self.state_dir / f"placeholder-{name}.pid"
            text = pid_file.read_text().strip() if pid_file.exists() else ""
            if text.isdigit():
                found.append({"name": name, "pid": int(text), "argv": placeholder.argv})
        return found


def not_running(started: list[dict[str, Any]]) -> list[str]:
    """Why each recorded placeholder is not holding the hardware (exited, or its pid runs something else)."""
    return [f"{record.get('name')} (pid {record.get('pid')}) is not running" for record in started if not _runs(record)]


def _runs(record: dict[str, Any]) -> bool:
    pid, argv = record.get("pid"), record.get("argv")
    if not isinstance(pid, int) or not isinstance(argv, list) or not pid_alive(pid):
        return False
    return command_of(pid)[-len(argv) :] == [str(a) for a in argv]
