"""What a role's host holds: the sha256 of its pinned files (a worker library, a model's weights index), and
the state of its pinned git checkout."""

from __future__ import annotations

import shlex
from pathlib import Path

from fairwin.files import sha256_file
from fairwin.launch.shell import shell
from fairwin.launch.spec import LaunchSpec


async def digests(spec: LaunchSpec, paths: list[str]) -> dict[str, str | None]:
    """path -> sha256 on the role's host (here, or there with ``sha256sum``: over SSH, or on its Slurm node); None
    where the file is absent."""
    if spec.remote is None or spec.host is None:
        return {p: sha256_file(Path(p)) if Path(p).is_file() else None for p in paths}
    # sha256sum exits 1 where a file is absent, and still prints the others': the lines decide, not the status
    _, out = await shell(
        spec.host, spec.remote, "sha256sum -- " + " ".join(shlex.quote(p) for p in paths), retry="read"
    )
    found: dict[str, str | None] = dict.fromkeys(paths)
    for line in out.splitlines():
        digest, _, path = line.partition("  ")
        if path in found:
            found[path] = digest
    return found


#: HEAD, then a marker, then every tracked file with uncommitted changes (git's porcelain lines).
_CHECKOUT = "git -C {path} rev-parse HEAD && echo -- && git -C {path} status --porcelain --untracked-files=no"


async def checkout(spec: LaunchSpec, path: str) -> tuple[str | None, list[str]]:
    """A git checkout on the role's host: (its HEAD, the tracked files it changed); HEAD None where it is no
    checkout (or git is missing)."""
    code, out = await shell(spec.host, spec.remote, _CHECKOUT.format(path=shlex.quote(path)), retry="read")
    head, _, changed = out.partition("--\n")
    if code != 0 or not head.strip():
        return None, []
    return head.strip(), [line[3:] for line in changed.splitlines() if line.strip()]
