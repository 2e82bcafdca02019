"""The run directories remote servers leave on their hosts (launch/remote.py), found by name, not by a session.

Each server fairwin launches on a host keeps its process group's id in
``RUN_DIR/fairwin-WINDOW-START-ROLE-MEMBER/group``. What a window left running there
is found through those files: the quiet proof refuses while any of them names a group
that still runs, and ``fairwin recover`` stops the groups of the interrupted window's
directories and removes them.
"""

from __future__ import annotations

import shlex

from fairwin.errors import LaunchError
from fairwin.launch.process_scripts import GROUP_ALIVE
from fairwin.launch.shell import shell
from fairwin.launch.spec import RUN_PREFIX
from fairwin.plan.hosts import Host

#: Each run directory under BASE whose name starts with PREFIX and whose group still runs: "NAME GROUP" (after
#: GROUP_ALIVE).
_LIVE = (
    'for d in {base}/{prefix}*; do [ -f "$d/group" ] || continue; g=$(cat "$d/group"); '
    'alive "$g" && echo "$(basename "$d") $g"; done; true'
)
#: The same directories' groups stopped (SIGTERM, SIGKILL after GRACE tenths of a second), each directory removed.
_STOP = (
    'for d in {base}/{prefix}*; do [ -f "$d/group" ] || continue; g=$(cat "$d/group"); '
    'if alive "$g"; then kill -TERM -"$g"; i=0; '
    'while alive "$g" && [ $i -lt {tenths} ]; do sleep 0.1; i=$((i+1)); done; '
    'kill -KILL -"$g" 2>/dev/null; echo "$(basename "$d") $g"; fi; rm -rf "$d"; done; true'
)


def _base(host: Host) -> str:
    return host.run_dir if host.run_dir.startswith("/") else f'"$HOME"/{shlex.quote(host.run_dir)}'


async def live_runs(name: str, host: Host, window_id: str | None = None) -> list[str]:
    """'NAME (group G)' for each server fairwin left running on the host (of one window, or of any)."""
    prefix = shlex.quote(RUN_PREFIX + (f"{window_id}-" if window_id else ""))
    code, out = await shell(name, host, GROUP_ALIVE + _LIVE.format(base=_base(host), prefix=prefix), retry="read")
    if code != 0:
        raise LaunchError(f"cannot list the servers fairwin runs on host {name} (exit {code})")
    return [f"{run} (group {group})" for run, _, group in (line.partition(" ") for line in out.split("\n")) if group]


async def stop_runs(name: str, host: Host, window_id: str, grace_s: float) -> list[str]:
    """Stop every server of the window still running on the host by its run directory, and remove those
    directories; what was stopped, one line each."""
    prefix = shlex.quote(f"{RUN_PREFIX}{window_id}-")
    script = GROUP_ALIVE + _STOP.format(base=_base(host), prefix=prefix, tenths=max(1, round(grace_s * 10)))
    code, out = await shell(name, host, script, retry="action")
    if code != 0:
        raise LaunchError(f"cannot stop the servers fairwin left on host {name} (exit {code})")
    return [f"group {g} ({run}) on host {name}" for run, _, g in (line.partition(" ") for line in out.split("\n")) if g]
