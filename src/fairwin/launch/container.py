"""The container launcher: a role's server (or a worker) as a docker or podman container, here or on its host.

A ``docker run`` client is not the server: signalling it leaves the container holding
the GPU. So the container is started detached, named and labelled for its window and
start, and everything else goes through the runtime: its main process and environment
from ``inspect``, its output from ``logs -f`` into the start's log, its death from
``wait``, and its stop as ``stop -t GRACE`` (SIGTERM, SIGKILL after the grace period),
``kill`` if it still runs, then ``rm -f``. The container's own environment is compared
with what it was given: its image's variables, the declared ones, and the few a runtime
sets itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from fairwin.directory.start_receipt import ContainerReceipt, StopRecord
from fairwin.errors import LaunchError, ProductionError, ServerExitedError
from fairwin.launch.inspect import Inspected, image_env, parse_inspect
from fairwin.launch.local import HEALTH_POLL_S, Note, health_answer, last_log_line, refuse_when_late
from fairwin.launch.runtime_cli import RuntimeCli
from fairwin.launch.spec import LaunchSpec
from fairwin.plan.hosts import BACKOFF_S, MAX_BACKOFF_S
from fairwin.redaction import scrub, scrub_file

#: Variables a runtime sets in every container itself, unless the image or the plan sets them.
RUNTIME_SET = frozenset({"PATH", "HOSTNAME", "TERM", "HOME", "container"})
#: The exit status of a container its runtime had to SIGKILL (128 + 9).
KILLED = 137
#: How long the followed log may lag behind the runtime's own.
CATCH_UP_S = 5.0
#: While it starts, how often its state is also read from ``inspect``.
STATE_POLL_S = 1.0


def run_args(spec: LaunchSpec) -> list[str]:
    """``run -d …`` for the spec: its name, labels, host network, variables, mounts, devices, then image and argv."""
    box = spec.container
    assert box is not None and spec.container_name is not None, "a container spec, for one start (for_start)"
    args = ["run", "-d", "--name", spec.container_name, "--network", "host"]
    args += [f"--label={key}={value}" for key, value in sorted(spec.labels.items())]
    args += ["--init"] if box.init else []
    args += [f"--env={key}={value}" for key, value in sorted(spec.env.items())]
    args += [f"--volume={mount}" for mount in box.mounts]
    args += [f"--device={device}" for device in box.devices]
    args += [f"--gpus={box.gpus}"] if box.gpus is not None else []
    args += [f"--workdir={box.workdir}"] if box.workdir is not None else []
    args += [f"--entrypoint={box.entrypoint}"] if box.entrypoint is not None else []
    return [*args, *box.run_args, box.image, *spec.argv]


def expected_env(given: dict[str, str], image: dict[str, str], running: dict[str, str]) -> dict[str, str]:
    """What the container should run with: its image's variables, then the given ones, and what the runtime sets
    itself (read back from ``running``) where neither sets it."""
    own = {k: v for k, v in running.items() if k in RUNTIME_SET and k not in image and k not in given}
    return {**own, **image, **given}


@dataclass
class ContainerServer:
    """One container; the same life as a local server: start, wait_healthy, always stop."""

    spec: LaunchSpec
    log_path: Path
    cli: RuntimeCli
    inspected: Inspected | None = None
    expected: dict[str, str] = field(default_factory=dict)
    exited: int | None = None
    lost: str | None = None
    stop_record: StopRecord | None = None
    healthy_after_s: float | None = None
    note: Note | None = None  # where a reconnection to its host is reported (the window journals it)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def name(self) -> str:
        assert self.spec.container_name is not None
        return self.spec.container_name

    @property
    def pid(self) -> int | None:
        return self.inspected.pid if self.inspected is not None else None

    @property
    def listens_as(self) -> int | None:
        return self.pid  # its init (or its server): the session the server's socket belongs to

    @property
    def scheduling(self) -> dict[str, object] | None:
        return None

    @property
    def expected_env(self) -> dict[str, str]:
        return self.expected

    def report_to(self, note: Note) -> None:
        self.note = note

    def described(self) -> ContainerReceipt | None:
        return self.inspected.receipt(self.cli.runtime) if self.inspected is not None else None

    async def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        code, _, err = await self.cli.run(*run_args(self.spec))
        if code != 0:
            raise LaunchError(
                f"{self.spec.label}: `{self.cli.runtime} run` of container {self.name}{self.cli.where} exited "
                f"{code}: {scrub(_last(err))}; fix the role's container settings"
            )
        self.inspected = await self.inspect()
        image = self.inspected.image_id or (self.spec.container.image if self.spec.container is not None else "")
        code, out, _ = await self.cli.run("image", "inspect", image)
        self.expected = expected_env(self.spec.env, image_env(out) if code == 0 else {}, self.inspected.env)
        self._tasks = [asyncio.create_task(self._follow_logs()), asyncio.create_task(self._wait())]

    async def inspect(self) -> Inspected:
        code, out, err = await self.cli.run("inspect", "--type", "container", self.name)
        if code != 0:
            raise LaunchError(
                f"{self.spec.label}: container {self.name}{self.cli.where} could not be inspected "
                f"({self.cli.runtime} exited {code}: {_last(err)})"
            )
        try:
            return parse_inspect(out, self.name)
        except ProductionError as exc:
            raise LaunchError(f"{self.spec.label}: {exc}") from None

    async def _follow_logs(self, since: int | None = None) -> None:
        await self.cli.follow(["logs", "-f", *(["--since", str(since)] if since else []), self.name], self.log_path)

    async def _wait(self) -> None:
        """Its exit status once it ends (``wait``). The container runs on whatever becomes of the SSH connection
        that waits on it: a lost one is made again within the host's ``reconnect_s`` and the wait and the log
        followed on, as a process role's are; only then is the server lost."""
        while True:
            code, last = await self.cli.follow(["wait", self.name])
            if code is not None:
                self.exited = int(last) if last.strip().lstrip("-").isdigit() else code or -1
                return
            if self.stop_record is not None or not await self._reconnect():
                return

    async def _reconnect(self) -> bool:
        """Its host answers again within ``reconnect_s`` (a new connection, with backoff): reported, and its log
        followed on from the moment it was lost. False, the server counted lost, when none came."""
        host = self.cli.host
        assert host is not None  # only a remote runtime's wait loses its connection
        lost_at, t0, attempts, delay = int(time.time()) - 1, time.monotonic(), 0, BACKOFF_S
        while time.monotonic() - t0 < host.reconnect_s:
            attempts += 1
            with contextlib.suppress(LaunchError):
                code, _, _ = await self.cli.run("inspect", "--format", "{{.State.Status}}", self.name, timeout_s=30.0)
                if code == 0:
                    self._tasks.append(asyncio.create_task(self._follow_logs(since=lost_at)))
                    if self.note is not None:  # journaled: the one record of a reconnection
                        seconds = round(time.monotonic() - t0, 3)
                        self.note(
                            "reconnected",
                            {
                                "host": self.cli.host_name,
                                "attempts": attempts,
                                "seconds": seconds,
                                "container": self.name,
                            },
                        )
                    return True
            await asyncio.sleep(min(delay, max(0.0, host.reconnect_s - (time.monotonic() - t0))))
            delay = min(delay * 2, MAX_BACKOFF_S)
        self.lost = (
            f"the SSH connection to host {self.cli.host_name} was lost while container {self.name} ran, and not "
            f"re-established within {host.reconnect_s:g} s (hosts.{self.cli.host_name}.reconnect_s)"
        )
        return False

    async def catch_up(self) -> None:
        """Wait (a few seconds at most) until the followed log holds every line the runtime has of the container
        now: ``logs -f`` copies its output a moment after the server wrote it."""
        code, out, err = await self.cli.run("logs", self.name)
        if code != 0:
            return
        lines = (out + err).count("\n")
        deadline = time.monotonic() + CATCH_UP_S
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if self.log_path.read_bytes().count(b"\n") >= lines:
                    return
            await asyncio.sleep(HEALTH_POLL_S)

    async def process_env(self) -> dict[str, str] | None:
        return (await self.inspect()).env

    def problem(self) -> str | None:
        return self.lost

    def exit_code(self) -> int | None:
        return self.exited

    def log_tail(self) -> str:
        return last_log_line(self.log_path)

    async def _refresh_exit(self) -> None:
        """Its exit status from ``inspect``, where ``wait`` has not reported one (a ``wait`` that began as the
        container ended can miss it on a loaded machine)."""
        if self.exited is not None:
            return
        code, out, _ = await self.cli.run("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", self.name)
        state, _, exit_code = out.strip().partition(" ")
        if code == 0 and state in ("exited", "stopped", "dead") and exit_code.lstrip("-").isdigit():
            self.exited = int(exit_code)

    async def wait_healthy(self, session: aiohttp.ClientSession) -> float:
        t0 = time.monotonic()
        next_look = t0 + STATE_POLL_S
        while True:
            if time.monotonic() >= next_look:
                await self._refresh_exit()
                next_look = time.monotonic() + STATE_POLL_S
            if (code := self.exit_code()) is not None or self.lost:
                await self.catch_up()
                raise ServerExitedError(
                    f"{self.spec.label}: "
                    + (self.lost or f"container {self.name} exited with code {code} before it was healthy")
                    + f"; last log line: {self.log_tail()!r} (log: {self.log_path})"
                )
            last = await health_answer(session, self.spec.health_url)
            if last is None:
                self.healthy_after_s = time.monotonic() - t0
                await self.catch_up()  # what it logged while starting is read next (its config)
                return self.healthy_after_s
            refuse_when_late(self.spec, t0, last, self.log_path)
            await asyncio.sleep(HEALTH_POLL_S)

    async def stop(self) -> StopRecord:
        """``stop -t GRACE`` (SIGTERM, SIGKILL after the grace period), ``kill`` if it still runs, then ``rm -f``;
        a container that was never created is still removed by name (a ``run`` cut short may have made it)."""
        if self.stop_record is not None:
            return self.stop_record
        t0 = time.monotonic()
        before = self.exited
        sent = "none"
        if self.inspected is not None and before is None:
            grace = max(1, math.ceil(self.spec.stop_timeout_s))
            await self.cli.run("stop", "-t", str(grace), self.name, timeout_s=grace + 60.0)
            sent = "SIGTERM"
        final = await self._final_state()
        if final is not None and final.status == "running":
            await self.cli.run("kill", self.name)
            sent = "SIGKILL"
        code = final.exit_code if final is not None else before
        if sent == "SIGTERM" and code == KILLED:
            sent = "SIGKILL"
        self.stop_record = StopRecord(signal=sent, returncode=code, seconds=time.monotonic() - t0)
        removed, _, err = await self.cli.run("rm", "-f", self.name)
        await self._close()
        if removed != 0 and "no such container" not in err.lower() and "no container" not in err.lower():
            raise LaunchError(f"{self.spec.label}: container {self.name}{self.cli.where} was not removed: {_last(err)}")
        return self.stop_record

    async def _final_state(self) -> Inspected | None:
        with contextlib.suppress(LaunchError):
            return await self.inspect()
        return None

    async def _close(self) -> None:
        for task in self._tasks:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, LaunchError, OSError):
                await asyncio.wait_for(task, 5.0)
        scrub_file(self.log_path)


def _last(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][-300:] if lines else "no output"
