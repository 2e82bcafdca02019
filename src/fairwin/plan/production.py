"""The plan's ``[production]``: how production leaves its hardware for a window and comes back.

Production is either a role fairwin launches itself (detached, so it outlives fairwin,
with its pid kept in ``state_dir``), or managed elsewhere (``systemctl``, a container
runtime) through ``up`` and ``down`` commands. Either way fairwin proves what it did:
up is the health path answering 200, down is the port refusing and none of the
``must_not_run`` command lines running; after a restore it watches production answer
real tiny requests for ``watch_s`` seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from fairwin.plan.base import StrictModel

#: The watch sends real requests to production: at most this many tokens each.
WATCH_MAX_TOKENS = 8


class LiveProcess(StrictModel):
    """One of production's running processes, found on its host before the take-down: by a command-line
    substring (the oldest process holding it), or as a container the runtime inspects."""

    host: str | None = Field(None, description="Its [hosts.NAME] (default: production's host, else here).")
    match: str | None = Field(None, description="A command-line substring; the oldest process holding it.")
    container: str | None = Field(None, description="A container's name; `RUNTIME inspect` gives its env and mounts.")
    runtime: Literal["docker", "podman"] = Field("docker", description="The container runtime that inspects it.")
    runtime_env: dict[str, str] = Field(
        default_factory=dict, description="Variables for the runtime's CLI itself (DOCKER_HOST, CONTAINERS_CONF)."
    )
    log: str | None = Field(
        None,
        description="A file on its host holding its server's output (relative: to the plan here, to the login's "
        "home on a host): its 'non-default args' line is the speculative config it runs (a container's own logs "
        "are read without one).",
    )

    @model_validator(mode="after")
    def _one_way_to_find_it(self) -> LiveProcess:
        if (self.match is None) == (self.container is None):
            raise ValueError("give either match (a command-line substring) or container (its name)")
        return self


class LiveSettings(StrictModel):
    """Where production's processes run, so what it really runs (env, argv, speculative config) is read."""

    head: LiveProcess | None = Field(
        None, description="The API server (default for a production role: the pid fairwin launched it as)."
    )
    workers: list[LiveProcess] = Field(
        default_factory=list, description="Its other processes, in the order a derived role lists its workers."
    )


class ProductionSettings(StrictModel):
    role: str | None = Field(
        None, description="A role fairwin launches as production, detached; its port must be fixed."
    )
    hardware_lock: str = Field(
        ".fairwin/hardware.lock",
        description="On a remote production's host (relative: to the login's home), the file that holds its "
        "hardware for one window at a time across coordinators, where the archive is not PostgreSQL.",
    )
    host: str | None = Field(
        None, description="Managed elsewhere on this [hosts.NAME]: up, down and must_not_run run there over SSH."
    )
    up: list[str] = Field(default_factory=list, description="Managed elsewhere: the command that brings it up.")
    down: list[str] = Field(default_factory=list, description="Managed elsewhere: the command that takes it down.")
    base_url: str | None = Field(None, description="Where production answers (default: the role's base_url).")
    health_path: str | None = Field(None, description="Polled until 200 (default: the role's, else /health).")
    model: str | None = Field(None, description="The model the watch's requests name (default: the role's).")
    commit: str | None = Field(
        None,
        description="What production runs (a commit or build id), keying the control archive "
        "(default: its declaration's digest).",
    )
    slurm_job: str | None = Field(
        None,
        description="Production is this Slurm job (its name, `sbatch -J`): Slurm takes it down when the window's job "
        "starts on its node and gives it back when that job ends; fairwin proves both ([cluster], docs/cluster.md).",
    )
    slurm_take_down: Literal["preemption", "requeue"] = Field(
        "preemption",
        description="How a Slurm production leaves its node: the cluster's own preemption (a partition tier or QOS "
        "that preempts with requeue), or `scontrol requeue` by `fairwin submit` where the cluster does not preempt.",
    )
    api_key_env: str | None = Field(
        None, description="The env variable holding production's API key (default: the role's api_key_env)."
    )
    live: LiveSettings | None = Field(
        None, description="Where its running processes are found before the take-down (production as it runs)."
    )
    must_not_run: list[str] = Field(
        default_factory=list, description="Command-line substrings: no such process may run while it is down."
    )
    up_timeout_s: float = Field(600.0, gt=0, description="How long production may take to answer health.")
    down_timeout_s: float = Field(120.0, gt=0, description="How long it may take to stop answering.")
    watch_s: float = Field(30.0, ge=0, description="After a restore: healthy for this long.")
    watch_requests: int = Field(3, ge=0, description="Real completions during the watch, each answered.")
    watch_max_tokens: int = Field(WATCH_MAX_TOKENS, ge=1, le=WATCH_MAX_TOKENS)
    state_dir: Path | None = Field(
        None, description="Where the pid of a production fairwin launched is kept (default: OUTPUT_DIR/.production)."
    )
    remote_dir: str = Field(
        ".fairwin/production",
        description="A production role on a host: where its pid file and log are kept there (relative: to the home).",
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/") if value else value

    @model_validator(mode="after")
    def _one_way_to_run_it(self) -> ProductionSettings:
        commands = bool(self.up) or bool(self.down)
        if (self.role is not None) + commands + (self.slurm_job is not None) != 1:
            raise ValueError(
                "give one of role (fairwin launches production), both up and down (managed elsewhere), or slurm_job "
                "(Slurm runs it)"
            )
        if self.slurm_job is not None:
            return self._scheduled()
        if commands and not (self.up and self.down):
            raise ValueError("up and down come together: production managed elsewhere needs both commands")
        if self.host is not None and not commands:
            raise ValueError("host goes with up and down; a production role runs where its own `host` says")
        if commands and self.live is not None and self.live.head is None:
            raise ValueError(
                "live.head: production managed elsewhere has no pid fairwin knows; say how to find "
                "its API server (match or container)"
            )
        if commands and (self.base_url is None or self.model is None):
            raise ValueError("production managed elsewhere needs base_url and model (what the watch requests)")
        return self

    def _scheduled(self) -> ProductionSettings:
        """Production as a Slurm job: Slurm starts and stops it, so fairwin needs where it answers, and nothing to
        run on a host."""
        if self.host is not None or self.live is not None:
            raise ValueError("slurm_job: Slurm runs production on its nodes; host and live do not apply")
        if self.base_url is None or self.model is None:
            raise ValueError("slurm_job needs base_url and model (where production answers, what the watch requests)")
        return self
