"""Placeholders as steps of a Slurm chain's hold job (custody/slurm_chain.py, docs/cluster.md).

Each window of a chain on Slurm is a step of the chain's hold job, and a step's processes end with it: a
placeholder the window started itself would end with the window, or (where Slurm tracks processes by their
parents) outlive it untracked. So the hold job's batch step, which lasts as long as the hold, starts them: it
reads, one line each, the path of a script from a FIFO in the output directory (``.hold-JOB.steps``, made by the
batch step on its node, the node each window of the chain runs on) and runs it in the background. The script is
``srun``, which makes the placeholder a step of the hold job on its node (the window's, or the node a ``[cluster]
hosts`` name is bound to), under a name no other step has. The window then finds the step by that name, proves
its task runs the placeholder's command there, and records both; stopping it is ``scancel`` of the step (SIGTERM,
SIGKILL after its ``stop_timeout_s``), from wherever the chain ends.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fairwin.errors import ProductionError, SchedulerError
from fairwin.launch.scheduler import ENDED, job_fields, on_node, slurm, srun_argv, step_pids, steps_named
from fairwin.plan.chain_settings import Placeholder
from fairwin.plan.hosts import SlurmNode
from fairwin.production.detached import command_of
from fairwin.production.placeholder_record import RunningPlaceholder

#: A placeholder's step is named this and its own name, then a token.
STEP_PREFIX = "fairwin-hold-"
#: How long the batch step and srun may take to make a requested step and start its task before the start fails.
STEP_WAIT_S = 20.0
#: How long a step may stay listed after SIGKILL.
KILL_WAIT_S = 5.0
_POLL_S = 0.2


def requests_path(output_dir: Path, job: str) -> Path:
    """The FIFO the hold job's batch step reads placeholder requests from."""
    return output_dir / f".hold-{job}.steps"


def batch_script(output_dir: Path) -> str:
    """The hold job's batch step: its FIFO made, then every script path written to it run in the background, until
    the job ends (the FIFO removed then). It holds the FIFO open for writing too, so it never reads an end."""
    fifo = shlex.quote(str(output_dir)) + '/.hold-"$SLURM_JOB_ID".steps'
    return (
        f'f={fifo}; rm -f "$f"; mkfifo -m 600 "$f" || exit 1; exec 3<>"$f"; '
        "trap 'rm -f \"$f\"' EXIT; trap 'exit 0' TERM INT; "
        'while IFS= read -r s <&3; do sh "$s" & done'
    )


def _here() -> str | None:
    return os.environ.get("SLURMD_NODENAME")


@dataclass(frozen=True)
class HoldSteps:
    """Starting placeholders as steps of hold job ``job`` from a window running on ``node``, the batch step's."""

    job: str
    node: str
    output_dir: Path
    state_dir: Path
    base_dir: Path
    nodes: Mapping[str, SlurmNode]  # [cluster] hosts, bound to the job's nodes

    def node_of(self, placeholder: Placeholder) -> str:
        """Where it runs: on its bound host's node, else on the window's."""
        host = placeholder.host
        return self.nodes[host].node if host is not None and host in self.nodes else self.node

    async def start(self, name: str, placeholder: Placeholder) -> RunningPlaceholder:
        """Asked of the batch step, then found: the step by its name, its first task on its node."""
        node, step_name = self.node_of(placeholder), f"{STEP_PREFIX}{name}-{secrets.token_hex(4)}"
        log = self.state_dir / f"placeholder-{name}.log"
        env = [f"{key}={value}" for key, value in sorted(placeholder.env.items())]
        command = ["env", *env, *placeholder.argv]
        srun = srun_argv(self.job, node, command, name=step_name, flags=[f"--chdir={self.base_dir}"])
        script = self.state_dir / f"placeholder-{name}.sh"
        self.state_dir.mkdir(parents=True, exist_ok=True)
        script.write_text(f"exec {shlex.join(srun)} >>{shlex.quote(str(log))} 2>&1\n")
        self.ask(script)
        step, pids = await self._found(step_name, node, log)
        return RunningPlaceholder(
            name=name, argv=placeholder.argv, pid=min(pids), host=placeholder.host, slurm_step=step, node=node
        )

    def ask(self, script: Path) -> None:
        """The script's path written to the batch step's FIFO; refused at once where nothing reads it."""
        fifo = requests_path(self.output_dir, self.job)
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:  # ENOENT: never made; ENXIO: nobody reads it
            raise ProductionError(
                f"the chain's hold job {self.job} takes no placeholder requests ({fifo}: {exc.strerror}); its batch "
                "step must be fairwin's (`fairwin submit --chain` queues it)"
            ) from None
        try:
            os.write(fd, f"{script}\n".encode())
        finally:
            os.close(fd)

    async def _found(self, step_name: str, node: str, log: Path) -> tuple[str, list[int]]:
        """The step's id and its task's pids once Slurm lists both (slurmctld lists a step before its node runs
        it); ProductionError naming what was last seen and what srun said where that never happens."""
        deadline, seen = time.monotonic() + STEP_WAIT_S, f"Slurm lists no step {step_name}"
        while time.monotonic() < deadline:
            try:
                step = (await asyncio.to_thread(steps_named, self.job)).get(step_name)
                if step is not None:
                    seen = f"step {step} lists no process on node {node}"
                    if pids := await asyncio.to_thread(step_pids, step, node, node != _here()):
                        return step, pids
            except SchedulerError as exc:
                seen = f"its step {step_name} cannot be read ({exc})"
            await asyncio.sleep(_POLL_S)
        said = log.read_text(errors="replace").strip().splitlines()[-2:] if log.exists() else []
        raise ProductionError(
            f"in the hold job {self.job}, {seen} after {STEP_WAIT_S:.0f} s; srun said: {'; '.join(said) or 'nothing'}"
        )


async def left_steps(job: str, declared: Mapping[str, Placeholder]) -> list[RunningPlaceholder]:
    """The placeholder steps of hold job ``job`` (a window that died while starting them leaves them unrecorded):
    each by its step's name and node; none where the job cannot be asked (it ended, and its steps with it)."""
    try:
        said = await asyncio.to_thread(slurm, "squeue", "-h", "-s", "-j", job, "-o", "%i %j %N")
    except SchedulerError:
        return []
    found = []
    for step, step_name, node in (words for words in map(str.split, said.splitlines()) if len(words) == 3):
        name = step_name.removeprefix(STEP_PREFIX).rpartition("-")[0]
        if step_name.startswith(STEP_PREFIX) and name in declared:
            placeholder = declared[name]
            found.append(
                RunningPlaceholder(name=name, argv=placeholder.argv, host=placeholder.host, slurm_step=step, node=node)
            )
    return found


async def step_runs(record: RunningPlaceholder) -> bool:
    """The record's step is still listed and its task still runs the placeholder's command on its node; a step
    whose job cannot be asked is ProductionError (fail closed: not proved running, not proved gone)."""
    step, node, pid = record.slurm_step, record.node, record.pid
    assert step is not None and node is not None  # a step's record names both
    job = step.split(".")[0]
    try:
        listed = step in (await asyncio.to_thread(steps_named, job)).values()
    except SchedulerError as exc:
        if await asyncio.to_thread(_ended, job):
            return False  # the hold job ended, and every step of it
        raise ProductionError(f"its Slurm step {step} cannot be read: {exc}") from None
    if not listed:
        return False
    if pid is None:
        pid = min(await asyncio.to_thread(step_pids, step, node, node != _here()), default=None)
        if pid is None:
            return False
    if node == _here():
        running = command_of(pid)
    else:
        try:
            said = await asyncio.to_thread(on_node, job, node, ["cat", f"/proc/{pid}/cmdline"])
        except SchedulerError:
            return False  # cat fails for a pid that is gone
        running = [arg for arg in said.split("\0") if arg]
    return running[-len(record.argv) :] == [str(arg) for arg in record.argv]


def _ended(job: str) -> bool:
    """Slurm says the job ended (or no longer knows it); False where it cannot be asked at all."""
    try:
        return job_fields(job).get("JobState", "") in ENDED
    except SchedulerError as exc:
        return "Invalid job id" in str(exc)


async def stop_step(record: RunningPlaceholder, grace_s: float) -> str:
    """SIGTERM to the step's tasks, then SIGKILL where it is still listed ``grace_s`` later. Slurm 22.05's scancel,
    run outside the step's job, ends the step and then fails ("Invalid job id specified"): what decides is whether
    Slurm still lists the step, and what scancel said is kept for the error where it does."""
    step = str(record.slurm_step)
    try:
        said = await _signal(step, "TERM")
        if await _gone_within(step, grace_s):
            return "SIGTERM"
        said = await _signal(step, "KILL") or said
        if await _gone_within(step, KILL_WAIT_S):
            return "SIGKILL"
    except SchedulerError as exc:
        raise ProductionError(f"its Slurm step {step} cannot be read: {exc}") from None
    raise ProductionError(f"its Slurm step {step} is still listed after SIGKILL{f' ({said})' if said else ''}")


async def _signal(step: str, signal: str) -> str | None:
    """``scancel --signal`` of the step; what it said where it failed."""
    try:
        await asyncio.to_thread(slurm, "scancel", "--quiet", f"--signal={signal}", step)
    except SchedulerError as exc:
        return str(exc)
    return None


async def _gone_within(step: str, seconds: float) -> bool:
    """Slurm no longer lists the step, within ``seconds``."""
    deadline = time.monotonic() + seconds
    while step in (await asyncio.to_thread(steps_named, step.split(".")[0])).values():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(_POLL_S)
    return True
