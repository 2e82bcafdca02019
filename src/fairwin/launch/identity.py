"""The sha256 of files on a role's host: its identity pins (a worker library, a model's weights index)."""

from __future__ import annotations

import shlex
from pathlib import Path

from fairwin.durable import sha256_file
from fairwin.launch.spec import LaunchSpec


async def digests(spec: LaunchSpec, paths: list[str]) -> dict[str, str | None]:
    """path -> sha256 on the role's host (here, or over SSH with ``sha256sum``); None where the file is absent."""
    if spec.remote is None or spec.host is None:
        return {p: sha256_file(Path(p)) if Path(p).is_file() else None for p in paths}
    from fairwin.launch.ssh import run_once  # asyncssh only where a role runs remotely

    done = await run_once(spec.host, spec.remote, "sha256sum -- " + " ".join(shlex.quote(p) for p in paths))
    found: dict[str, str | None] = dict.fromkeys(paths)
    for line in str(done.stdout or "").splitlines():
        digest, _, path = line.partition("  ")
        if path in found:
            found[path] = digest
    return found
