"""A role (or one of its workers) that runs as a container under docker or podman, here or on its host.

The role's ``argv`` is what follows the image on the ``run`` line (the command, or the
arguments of the image's entrypoint); its ``env`` and ``env_files`` become the
container's variables, and nothing of fairwin's own environment is passed in.

A container runs on its host's network (``--network host``), as GPU serving containers
usually do: fairwin proves that what answers on the role's port is the server it
launched, by the process holding the socket, and a published port (``-p``) would hide
that process behind the runtime's proxy.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from fairwin.plan.base import StrictModel

#: A mount as ``-v`` writes it: SOURCE:DESTINATION[:OPTIONS], the destination an absolute path in the container.
MOUNT_RE = re.compile(r"^[^:]+:/[^:]*(:[A-Za-z0-9,=_-]+)?$")


class Container(StrictModel):
    """How the container is run; fairwin names and labels it for the window and the start."""

    runtime: Literal["docker", "podman"] = Field("podman", description="The container runtime's CLI.")
    runtime_env: dict[str, str] = Field(
        default_factory=dict,
        description="Variables for the runtime's CLI itself, not the container (DOCKER_HOST, CONTAINERS_CONF).",
    )
    image: str = Field(min_length=1, description="The image, by name or id.")
    entrypoint: str | None = Field(None, description="Replaces the image's entrypoint (--entrypoint).")
    mounts: list[str] = Field(
        default_factory=list, description="Bind mounts as -v writes them: SOURCE:DESTINATION[:ro]."
    )
    devices: list[str] = Field(default_factory=list, description="Devices passed in (--device), e.g. /dev/nvidia0.")
    gpus: str | None = Field(None, description="GPUs given to it (--gpus), e.g. 'all' or 'device=0,1'.")
    init: bool = Field(
        True, description="Run a tiny init as pid 1 (--init), so the server gets the stop's SIGTERM at once."
    )
    workdir: str | None = Field(None, description="Its working directory inside the container (--workdir).")
    run_args: list[str] = Field(
        default_factory=list, description="More options for `run`, before the image (e.g. --ipc=host, --shm-size=8g)."
    )

    @field_validator("mounts")
    @classmethod
    def _mounts(cls, value: list[str]) -> list[str]:
        for mount in value:
            if not MOUNT_RE.match(mount):
                raise ValueError(f"{mount!r}: a mount is SOURCE:/destination[:options], e.g. /data/models:/models:ro")
        return value

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"{value!r}: a container's workdir is an absolute path inside it")
        return value

    @field_validator("run_args")
    @classmethod
    def _not_ours(cls, value: list[str]) -> list[str]:
        for arg in value:
            flag = arg.split("=", 1)[0]
            if flag in ("--name", "--label", "-l", "-d", "--detach", "--rm"):
                raise ValueError(f"{arg!r}: fairwin sets the container's name, labels and detaching itself")
            if flag in ("--network", "--net", "-p", "--publish", "-P", "--publish-all"):
                raise ValueError(
                    f"{arg!r}: a container role runs on the host's network, so that fairwin can see which process "
                    "holds its port; remove it"
                )
        return value

    def mount_destinations(self) -> dict[str, str]:
        """destination -> the mount as written."""
        return {mount.split(":")[1]: mount for mount in self.mounts}
