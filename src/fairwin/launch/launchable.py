"""Whether a process can be launched on its host, checked before production is taken down.

A typo in role B's command would otherwise be found at B's first start, after role A's
whole start has run with production down. So, for every process of the window's roles,
on its own host: its command (``argv[0]``) is a file it may execute (a bare name found
on the PATH it will run with), its working directory exists, and each fixed port it will
listen on is free, unless production holds it (it is freed by the take-down, and proved
free again at every start). A container's command runs inside its image, so for a
container it is its runtime that must answer on its host, and know the image. Env files
and ``{env:NAME}`` were resolved when the spec was made.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

from fairwin.errors import LaunchError
from fairwin.launch.listeners import check_free
from fairwin.launch.runtime_cli import RuntimeCli
from fairwin.launch.shell import shell
from fairwin.launch.spec import LaunchSpec

#: Printed by the remote check: what it found missing, or "ok".
_REMOTE_CHECK = """cd -- {cwd} 2>/dev/null || {{ echo cwd; exit 0; }}
found=$({path}command -v -- {command}) || {{ echo command; exit 0; }}
[ -f "$found" ] && [ -x "$found" ] || {{ echo command; exit 0; }}
echo ok"""


def _command_here(spec: LaunchSpec) -> bool:
    command = spec.argv[0]
    if "/" not in command:
        return shutil.which(command, path=spec.env.get("PATH")) is not None
    path = Path(command) if Path(command).is_absolute() else (spec.cwd or Path.cwd()) / command
    return path.is_file() and os.access(path, os.X_OK)


async def _missing_on_host(spec: LaunchSpec) -> str:
    """What the remote check found missing ("cwd", "command"), or "ok"."""
    path = spec.declared_env.get("PATH")
    script = _REMOTE_CHECK.format(
        cwd=shlex.quote(str(spec.cwd)) if spec.cwd is not None else '"$HOME"',
        path=f"PATH={shlex.quote(path)} " if path is not None else "",
        command=shlex.quote(spec.argv[0]),
    )
    try:
        code, out = await shell(spec.host, spec.remote, script, retry="read")
    except LaunchError as exc:
        return f"not checked: {exc}"
    return out.strip() if code == 0 else f"not checked: the check exited {code}"


async def _container_problems(spec: LaunchSpec) -> list[str]:
    """A container's runtime answers on its host, and knows the image (no registry is asked mid-window)."""
    assert spec.container is not None
    cli = RuntimeCli.of(spec.container, spec.host, spec.over_ssh())
    try:
        code, _, err = await cli.run("image", "inspect", "--format", "{{.Id}}", spec.container.image)
    except LaunchError as exc:
        return [f"{spec.label}: its container runtime could not be asked: {exc}"]
    if code == 127:
        return [f"{spec.label}: {cli.runtime} is not installed{cli.where}; install it or fix container.runtime"]
    if code != 0:
        why = err.strip().splitlines()[-1][:200] if err.strip() else f"exit {code}"
        return [
            f"{spec.label}: {cli.runtime}{cli.where} has no image {spec.container.image!r} ({why}); pull or build it "
            "there first"
        ]
    return []


async def _command_problems(spec: LaunchSpec) -> list[str]:
    """A process's command and working directory exist on its host."""
    where = f" on host {spec.host}" if spec.host is not None else ""
    if spec.remote is not None and spec.host is not None:
        missing = await _missing_on_host(spec)
    elif spec.cwd is not None and not spec.cwd.is_dir():
        missing = "cwd"
    else:
        missing = "ok" if _command_here(spec) else "command"
    if missing == "cwd":
        return [f"{spec.label}: its working directory {spec.cwd} does not exist{where}; fix its cwd"]
    if missing == "command":
        return [
            f"{spec.label}: {spec.argv[0]!r} is not an executable file{where} (nor a command on its PATH); fix argv[0]"
        ]
    return [] if missing == "ok" else [f"{spec.label}: its command{where} was {missing}"]


async def launch_problems(spec: LaunchSpec, fixed_ports: list[int]) -> list[str]:
    """Why this process could not be launched on its host now; [] when it could."""
    problems = await (_container_problems(spec) if spec.container is not None else _command_problems(spec))
    for port in fixed_ports:
        try:
            await check_free(spec, port)
        except LaunchError as exc:
            problems.append(str(exc))
    return problems
