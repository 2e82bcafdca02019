"""The plan's ``[hosts.NAME]``: machines a role runs on over SSH (docs/hosts.md); and, inside a window's Slurm
job, the plan's ``[cluster] hosts`` bound to the job's nodes (:class:`SlurmNode`, docs/cluster.md).

Keys only, never a password prompt: a key file (an encrypted one's passphrase read from
the variable ``passphrase_env`` names, and kept in memory only) or the SSH agent. The host's key must
be in ``known_hosts`` (an unknown host is refused, never trusted on first use).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from fairwin.plan.base import StrictModel

#: Reconnecting to a host within its ``reconnect_s``: the first wait between attempts, doubling up to the second.
BACKOFF_S = 0.5
MAX_BACKOFF_S = 5.0


class Host(StrictModel):
    address: str = Field(min_length=1, description="Host name or IP address to connect to.")
    port: int = Field(22, ge=1, le=65535)
    user: str | None = Field(None, description="The login (default: yours).")
    known_hosts: Path = Field(Path("~/.ssh/known_hosts"), description="Where the host's key must be listed.")
    key_file: Path | None = Field(None, description="The private key to log in with (else the agent's keys).")
    passphrase_env: str | None = Field(
        None, description="The env variable holding key_file's passphrase, for an encrypted key (else none)."
    )
    agent: bool = Field(True, description="Use the SSH agent's keys ($SSH_AUTH_SOCK) when there is one.")
    python: str = Field("python3", description="What {python} means in a role's argv on this host.")
    nvidia_smi: str = Field("nvidia-smi", description="The nvidia-smi that samples this host's GPUs.")
    connect_timeout_s: float = Field(10.0, gt=0, le=300)
    reconnect_s: float = Field(
        120.0,
        ge=0,
        description="A dropped connection to a server running here is retried, with backoff, for this long; "
        "0: a drop fails the start.",
    )
    detach: Literal["setsid", "tmux"] = Field(
        "setsid",
        description="How a server is detached from the SSH login there: setsid, or a tmux session named after it "
        "(as the runbook's hosts do; `tmux attach -t NAME` shows its output live).",
    )
    tmux_socket: str | None = Field(None, description="With detach = 'tmux': the tmux socket (tmux -L NAME).")
    run_dir: str = Field(
        ".fairwin/run",
        description="Where each server's pid, group, exit status and log are kept on the host (relative: to the "
        "login's home).",
    )


@dataclass(frozen=True)
class SlurmNode:
    """A host of the plan's ``[cluster] hosts``, bound to a node of the window's Slurm job: its processes run as
    steps of the job there, and every command on it runs through ``srun`` inside the job (launch/shell.py)."""

    node: str
    job_id: str
    address: str  # the node's address (Slurm's NodeAddr): its roles' {head_address}
    python: str = sys.executable  # the job's nodes share fairwin's installation (srun exports its environment)


#: Where a role's process runs, other than here: a host over SSH, or a node of the window's Slurm job.
Place = Host | SlurmNode


def resolved(host: Host, base_dir: Path) -> Host:
    """The host with its known_hosts and key file made absolute (``~`` expanded, relative to the plan)."""

    def absolute(path: Path) -> Path:
        path = path.expanduser()
        return path if path.is_absolute() else base_dir / path

    key = absolute(host.key_file) if host.key_file is not None else None
    return host.model_copy(update={"known_hosts": absolute(host.known_hosts), "key_file": key})
