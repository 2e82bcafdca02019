"""What a container runtime's ``inspect`` says a container runs: docker's and podman's JSON, read alike.

The two runtimes print the same fields fairwin needs (``Config.Env``, ``Path`` and
``Args``, ``Mounts``, ``Image``, ``State``), with small differences taken care of here:
docker writes the image id as ``sha256:HEX`` and podman as ``HEX``; a mount's ``Mode``
is free text in both, so whether it is writable is read from ``RW``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from fairwin.directory.start_receipt import ContainerReceipt
from fairwin.errors import ProductionError
from fairwin.redaction import fingerprinted


@dataclass(frozen=True)
class Inspected:
    """One container as its runtime reports it."""

    name: str
    container_id: str
    env: dict[str, str]
    argv: list[str]
    mounts: list[dict[str, str]]  # each: source, destination, mode ("ro" or "rw")
    image_id: str  # hex, without "sha256:"
    image: str  # the name it was run from
    pid: int | None  # its main process on the host (its init, with --init); None once it stopped
    status: str  # "running", "exited", ...
    exit_code: int | None
    labels: dict[str, str] = field(default_factory=dict)
    started_at: str | None = None  # State.StartedAt, RFC 3339: when its current run began (`logs --since` it)

    def receipt(self, runtime: str) -> ContainerReceipt:
        """What a start's receipt records: secrets in its env as digests, as in production's reading."""
        return ContainerReceipt(
            runtime=runtime,
            name=self.name,
            id=self.container_id[:12],
            image=self.image,
            image_id=self.image_id,
            env=fingerprinted(self.env),
            mounts=self.mounts,
            labels=self.labels,
        )


def image_id(raw: str) -> str:
    return raw.removeprefix("sha256:")


def _mount(found: dict[str, Any]) -> dict[str, str]:
    return {
        "source": str(found.get("Source", "")),
        "destination": str(found.get("Destination", "")),
        "mode": "rw" if found.get("RW", True) else "ro",
    }


def parse_inspect(raw: str, name: str) -> Inspected:
    """``docker inspect`` / ``podman inspect`` JSON of one container; ProductionError naming it when the output
    is not a container's."""
    try:
        found = json.loads(raw)
        box = found[0] if isinstance(found, list) else found
        config, state = box["Config"], box.get("State") or {}
        env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
        argv = [a for a in [box.get("Path") or "", *(box.get("Args") or [])] if a]
        pid = state.get("Pid")
        return Inspected(
            name=str(box.get("Name") or name).lstrip("/"),
            container_id=str(box.get("Id", "")),
            env=env,
            argv=argv,
            mounts=sorted((_mount(m) for m in box.get("Mounts") or []), key=lambda m: m["destination"]),
            image_id=image_id(str(box.get("Image", ""))),
            image=str(box.get("ImageName") or config.get("Image") or ""),
            pid=int(pid) if isinstance(pid, int) and pid > 0 else None,
            status=str(state.get("Status", "")),
            exit_code=state.get("ExitCode") if isinstance(state.get("ExitCode"), int) else None,
            labels={str(k): str(v) for k, v in (config.get("Labels") or {}).items()},
            started_at=str(state["StartedAt"]) if state.get("StartedAt") else None,
        )
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise ProductionError(
            f"container {name}: its runtime's inspect output is not what docker or podman print; is it a "
            "container's name?"
        ) from None


def image_env(raw: str) -> dict[str, str]:
    """An image's own variables from ``RUNTIME image inspect`` JSON ({} where it sets none)."""
    try:
        found = json.loads(raw)
        box = found[0] if isinstance(found, list) else found
        items = (box.get("Config") or {}).get("Env") or []
    except (ValueError, IndexError, TypeError, AttributeError):
        return {}
    return dict(item.split("=", 1) for item in items if "=" in item)
