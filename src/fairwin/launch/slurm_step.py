"""A role's process (its head, or a worker) as a step of the window's Slurm job: ``srun`` inside the allocation, on
the node the window runs on, or on the node its host is bound to (``[cluster] hosts``), so that Slurm tracks every
process the server starts and the job's end takes them all.

srun is one more command behind the command seam: the process fairwin starts is srun itself, in its own session
as every local server is; its output is the server's (srun forwards it to the start's log). The server runs under
the step's slurmstepd, not under srun, so what fairwin proves of it is proved of the step: the step is found by
its unique name (``squeue -s``), its tasks by ``scontrol listpids``, and the process listening on the role's port
must run in the step's session. On another node than the window's, each of these probes runs there, through srun
(a pid read here would be another machine's). Its environment is srun's with Slurm's own variables added
(``SLURM_*``, ``SLURMD_*``, ``SRUN_*``): those are set aside on both sides before the runtime check compares the
rest. Stopping signals srun, which ends the step; ``scancel`` of the step after that leaves nothing of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field

import aiohttp

from fairwin.directory.start_receipt import StopRecord
from fairwin.errors import LaunchError, SchedulerError, ServerExitedError
from fairwin.launch.local import LocalServer, read_process_env
from fairwin.launch.scheduler import node_state, on_node, slurm, srun_argv, step_pids, steps_named

#: Variables Slurm sets in a step's tasks (and the batch step's; SLURMD_NODENAME names the task's own node): the
#: runtime check compares the rest.
SLURM_OWN = ("SLURM_", "SLURMD_", "SRUN_")


def without_slurms(env: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if not key.startswith(SLURM_OWN)}


@dataclass
class SlurmStep(LocalServer):
    """One server as a step of Slurm job ``job_id`` on ``node``; found, after it answers, by ``step_name``."""

    job_id: str = ""
    node: str = ""
    away: bool = False  # on another node of the job than the window's: its processes are probed there, by srun
    step_name: str = field(default_factory=lambda: f"fairwin-{secrets.token_hex(6)}")
    step_id: str | None = None
    task_pid: int | None = None
    session: int | None = None

    def command(self) -> list[str]:
        return srun_argv(self.job_id, self.node, super().command(), name=self.step_name, flags=["--kill-on-bad-exit=1"])

    def _on_node(self, argv: list[str]) -> str:
        """What ``argv`` prints where the step runs: here, or on its node through srun."""
        return on_node(self.job_id, self.node, argv) if self.away else slurm(*argv)

    @property
    def listens_as(self) -> int | None:
        """The step's session: its tasks', where the server that listens must run."""
        return self.session

    async def wait_healthy(self, session: aiohttp.ClientSession) -> float:
        return await self.proved(super().wait_healthy(session))

    async def proved(self, waiting: Awaitable[float]) -> float:
        """``waiting`` (the head's health, or a worker's ready checks), then its step found; where srun could not
        run it, where it was to run and what Slurm knows of that node."""
        try:
            seconds = await waiting
        except ServerExitedError as exc:
            raise ServerExitedError(f"{exc}; {await asyncio.to_thread(self._step_failure)}") from None
        await asyncio.to_thread(self._find_step)
        return seconds

    def _step_failure(self) -> str:
        """What srun said of the failed step (its error lines, which name the node) and the node's state now."""
        try:
            said = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            said = []
        errors = [line.removeprefix("srun: error: ") for line in said if line.startswith("srun: error: ")][:3]
        shown = "; ".join(errors) or "nothing"
        return f"as a Slurm step on node {self.node} ({self._node_said()}), srun said: {shown}"

    def _node_said(self) -> str:
        try:
            return f"node {self.node}: {node_state(self.node)}"
        except SchedulerError as exc:
            return f"node {self.node}: its state could not be read ({exc})"

    def _find_step(self) -> None:
        """The step srun made (by its name) and its first task, on this node; LaunchError where Slurm does not show
        them: a server whose step cannot be seen is not proved to be the one fairwin launched."""
        try:
            found = steps_named(self.job_id).get(self.step_name)
            if found is None:
                raise LaunchError(f"{self.spec.label}: Slurm lists no step named {self.step_name} in job {self.job_id}")
            self.step_id = found
            pids = step_pids(found, self.node, self.away)
        except SchedulerError as exc:
            raise LaunchError(
                f"{self.spec.label}: its Slurm step could not be read, on node {self.node} ({self._node_said()}): {exc}"
            ) from None
        if not pids:
            raise LaunchError(f"{self.spec.label}: Slurm step {self.step_id} lists no process on node {self.node}")
        self.task_pid = min(pids)
        self.session = self._session_of(self.task_pid)
        if self.session is None:
            raise LaunchError(f"{self.spec.label}: step {self.step_id}'s task {self.task_pid} exited")

    def _session_of(self, pid: int) -> int | None:
        """The task's session, where it runs; None once it exited."""
        if not self.away:
            try:
                return os.getsid(pid)
            except ProcessLookupError:
                return None
        try:
            said = self._on_node(["ps", "-o", "sid=", "-p", str(pid)]).strip()
        except SchedulerError:
            return None  # ps exits 1 for a pid that is gone
        return int(said) if said.isdigit() else None

    def where(self) -> str:
        """The step, its node and the task that serves, for the start's receipt."""
        return f"step {self.step_id} on node {self.node}, task pid {self.task_pid}"

    async def process_env(self) -> dict[str, str] | None:
        if self.task_pid is None:
            return None
        env = await asyncio.to_thread(self._env_of, self.task_pid)
        return without_slurms(env) if env is not None else None

    def _env_of(self, pid: int) -> dict[str, str] | None:
        """The task's environment, read where it runs; None where it cannot be read (the check then fails)."""
        if not self.away:
            return read_process_env(pid)
        from fairwin.launch.ssh import parse_env  # the same NUL-separated pairs; asyncssh is imported with it

        try:
            return parse_env(self._on_node(["cat", f"/proc/{pid}/environ"]))
        except SchedulerError:
            return None

    @property
    def expected_env(self) -> dict[str, str]:
        return without_slurms(self.spec.env)

    def terminate(self) -> StopRecord:
        """srun signalled (it ends the step), then the step cancelled whatever is left of it."""
        record = super().terminate()
        if self.step_id is not None:
            with contextlib.suppress(SchedulerError):  # the step ended with srun, and Slurm forgot it already
                slurm("scancel", "--quiet", self.step_id)
        return record
