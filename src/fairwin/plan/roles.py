"""A role: how to launch one server configuration (here, or on a [hosts.NAME] over SSH).

A role that spans hosts lists its ``workers``: each is launched in order and waited
ready (a log line, a port, time alive) before the next, and the role's own argv, the
**head**, last; health is checked on the head's URL, the way multi-node vLLM starts.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, JsonValue, field_validator, model_validator

from fairwin.plan.base import StrictModel
from fairwin.plan.container_settings import Container
from fairwin.plan.cpus import CpuList

SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


def _checked_pins(value: dict[str, str]) -> dict[str, str]:
    for path, digest in value.items():
        if not path.startswith("/"):
            raise ValueError(f"{path!r}: identity pins name absolute paths on the role's host")
        if not SHA256_RE.match(digest):
            raise ValueError(f"{path!r}: {digest!r} is not 64 lowercase hex digits (run `sha256sum {path}`)")
    return value


class RepoPin(StrictModel):
    """A git checkout on a role's (or worker's) host that must be at ``commit``, with nothing tracked uncommitted,
    before any process of the window is launched (the runbook's pinned remote code)."""

    path: str = Field(description="The checkout's absolute path on the host.")
    commit: str = Field(description="The commit its HEAD must be: a full sha, or at least 7 of its hex digits.")
    artifacts: dict[str, str] = Field(
        default_factory=dict,
        description="`fairwin stage`: files it writes on the host, each from a commit's tree in this checkout "
        '({ "/abs/dest" = "COMMIT:path/in/tree" }, e.g. a verifier built at the qualified commit) or copied from '
        'a built file on the host ({ "/abs/dest" = "/abs/built/file" }, e.g. in an admission\'s worker tree).',
    )
    worktree_of: str | None = Field(
        None,
        description="`fairwin stage`: a clone on the host from which it makes `path` as a git worktree at "
        "`commit` when `path` is not there yet (a per-commit deploy checkout).",
    )

    @field_validator("artifacts")
    @classmethod
    def _artifacts(cls, value: dict[str, str]) -> dict[str, str]:
        for dest, source in value.items():
            commit, _, inside = source.partition(":")
            from_tree = re.fullmatch(r"[0-9a-f]{7,40}", commit) is not None and bool(inside)
            if not dest.startswith("/") or not (from_tree or source.startswith("/")):
                raise ValueError(
                    f"{dest!r} = {source!r}: an artifact is an absolute path on the host = "
                    '"COMMIT:path/in/tree" (7 to 40 hex digits, then the file in that commit) or the absolute '
                    "path of a built file on the host"
                )
        return value

    @field_validator("path", "worktree_of")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"{value!r}: a pinned checkout is an absolute path on the host")
        return value

    @field_validator("commit")
    @classmethod
    def _sha(cls, value: str) -> str:
        if not re.fullmatch(r"[0-9a-f]{7,40}", value):
            raise ValueError(f"{value!r} is not a commit's hex sha (7 to 40 lowercase digits: `git rev-parse HEAD`)")
        return value


class Ready(StrictModel):
    """When a worker counts as ready, so the next process may start: every check given must pass."""

    log: str | None = Field(None, description="A regex its output must print, e.g. 'Engine core ready'.")
    port: int | None = Field(None, ge=1, le=65535, description="A TCP port on its host that must accept.")
    after_s: float = Field(0.0, ge=0, description="Alive at least this long after its launch.")
    timeout_s: float = Field(300.0, gt=0, description="Not ready by then: the start fails.")

    @field_validator("log")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"{value!r} is not a regular expression: {exc}") from None
        return value


class Worker(StrictModel):
    """One more process of a role that spans hosts, launched (in list order) before the role's own argv."""

    host: str | None = Field(None, description="The [hosts.NAME] it runs on (default: here).")
    argv: list[str] = Field(min_length=1, description="Its command; {head_address} is the head's host address.")
    env: dict[str, str] = Field(default_factory=dict, description="Variables on top of the role's.")
    cwd: Path | None = None
    identity: dict[str, str] = Field(default_factory=dict, description="Files on its host whose sha256 must match.")
    repo: RepoPin | None = Field(None, description="A git checkout on its host pinned to a commit, clean.")
    container: Container | None = Field(None, description="Run it as a container (argv: what follows the image).")
    ready: Ready = Field(default_factory=Ready, description="When the next process may start.")

    @field_validator("identity")
    @classmethod
    def _pins(cls, value: dict[str, str]) -> dict[str, str]:
        return _checked_pins(value)


class Role(StrictModel):
    """How to launch one server configuration."""

    argv: list[str] = Field(min_length=1, description="The command, one list item per argument.")
    env: dict[str, str] = Field(default_factory=dict, description="Variables set on top of the inherited env.")
    env_files: list[Path] = Field(default_factory=list, description="KEY=VALUE files applied before `env`.")
    inherit_env: bool = Field(True, description="Start from fairwin's own environment.")
    cwd: Path | None = None
    base_url: str = Field(description="Where the server answers, e.g. http://127.0.0.1:{port}.")
    port: int | Literal["auto"] | None = Field(
        None, description="Fills {port}; 'auto' picks a free loopback port at each start."
    )
    health_path: str = "/health"
    startup_timeout_s: float = Field(600.0, gt=0)
    stop_timeout_s: float = Field(30.0, gt=0)
    served_model: str = Field(min_length=1, description="The model name requests carry.")
    api_key_env: str | None = Field(
        None, description="The env variable holding the key its requests carry (Authorization: Bearer)."
    )
    base: str | None = Field(None, description="Derive from this role's environment (e.g. production's).")
    unset_env: list[str] = Field(default_factory=list, description="With base: keys removed from the base env.")
    allowed_env_differences: list[str] = Field(
        default_factory=list, description="Keys whose effective value may differ from the base role's."
    )
    speculative: dict[str, JsonValue] | None = Field(
        None, description="The declared speculative config; {} means none. Checked at every start."
    )
    compare_live: bool | None = Field(
        None,
        description="Compare its processes' env and speculative config with production's live ones "
        "(read before the take-down) beyond allowed_env_differences (default: when base is production's role).",
    )
    host: str | None = Field(None, description="Run on this [hosts.NAME] over SSH (default: here).")
    identity: dict[str, str] = Field(
        default_factory=dict, description="Files on the role's host whose sha256 must match, checked at every start."
    )
    repo: RepoPin | None = Field(None, description="A git checkout on its host pinned to a commit, clean.")
    workers: list[Worker] = Field(
        default_factory=list, description="Processes on other hosts started first, in order (multi-node serving)."
    )
    container: Container | None = Field(
        None, description="Run it as a container under docker or podman (argv: what follows the image)."
    )
    allowed_mount_differences: list[str] = Field(
        default_factory=list,
        description="Compared with a container production: mount destinations that may differ from its mounts.",
    )
    allowed_image_difference: bool = Field(
        False, description="Compared with a container production: it may run another image (a new build)."
    )
    cpus: CpuList | None = Field(None, description="CPU list the server runs on (taskset), e.g. '0' or '0-3'.")
    nice: int | None = Field(
        None, ge=-20, le=19, description="The server's priority (nice, and its session's autogroup nice)."
    )

    @field_validator("port")
    @classmethod
    def _a_tcp_port(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, int) and not 1 <= value <= 65535:
            raise ValueError(f"must be a TCP port, 1 to 65535, or 'auto' (got {value})")
        return value

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")

    @field_validator("identity")
    @classmethod
    def _pins(cls, value: dict[str, str]) -> dict[str, str]:
        return _checked_pins(value)

    @field_validator("health_path")
    @classmethod
    def _absolute_path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must start with '/'")
        return value

    @model_validator(mode="after")
    def _port_placeholder_has_a_port(self) -> Role:
        uses_port = "{port}" in self.base_url or any("{port}" in a for a in self.argv)
        if uses_port and self.port is None:
            raise ValueError('uses {port} but sets no `port`; set port = 8000 or port = "auto"')
        if self.container is not None and (self.cpus is not None or self.nice is not None):
            raise ValueError(
                "cpus and nice apply to a process fairwin runs itself; give a container --cpuset-cpus in "
                "container.run_args instead"
            )
        if self.container is not None and self.cwd is not None:
            raise ValueError("a container's working directory is container.workdir, not cwd")
        return self
