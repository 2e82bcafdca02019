"""A real Slurm on this machine for the cluster tests: munge on its own socket, slurmctld and two slurmd (nodes
``n1`` and ``n2``, both this machine) with throwaway state, one cluster per test session.

No cgroups here: processes are tracked by ``proctrack/linuxproc`` and tasks bound by nothing. Three partitions over
both nodes: ``production`` (tier 1, its jobs requeued when preempted) and ``bench`` (tier 10, exclusive), as a
cluster that gives a benchmark's job production's node does (docs/cluster.md); and ``service`` (tier 10, never
preempted), as a cluster that does not. Beside it, what the cluster tests share: a window run in a job or submitted,
a sim production run as a Slurm job, and plans whose production is one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fairwin.files import scan_jsonl
from tests import forked
from tests.components import missing
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import wait_healthy
from tests.integration.production import WATCH
from tests.ports import free_port

NODES = ("n1", "n2")


@dataclass(frozen=True)
class Cluster:
    root: Path
    conf: Path

    @property
    def env(self) -> dict[str, str]:
        """This process's environment pointed at the cluster, outside any job."""
        kept = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        return {**kept, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        # From the cluster's own directory: a job's default output file (slurm-JOB.out) lands there, not here.
        done = subprocess.run(
            list(argv), env=self.env, cwd=self.root, capture_output=True, text=True, timeout=timeout, check=False
        )
        return done

    def wait_running(self, job: str, timeout: float = 30) -> None:
        """Until Slurm runs ``job`` (its state RUNNING), so that what holds a node is a fact, not a race."""
        deadline = time.monotonic() + timeout
        while self.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() != "RUNNING":
            assert time.monotonic() < deadline, f"job {job} never ran: {self.run('squeue').stdout}"
            time.sleep(0.2)

    def wait_ended(self, job: str, timeout: float = 90) -> None:
        """Until Slurm no longer runs or holds ``job``."""
        deadline = time.monotonic() + timeout
        while self.run("squeue", "-h", "-j", job).stdout.strip():
            assert time.monotonic() < deadline, f"job {job} never ended: {self.run('squeue').stdout}"
            time.sleep(0.2)

    def exit_code(self, job: str) -> int:
        """An ended job's exit code (``ExitCode=N:SIGNAL``), as Slurm keeps it for a while after the job."""
        shown = self.run("scontrol", "show", "job", "-o", job).stdout
        code = next((word.split("=", 1)[1] for word in shown.split() if word.startswith("ExitCode=")), "")
        assert code, f"job {job}: no exit code in {shown!r}"
        return int(code.split(":")[0])

    def job_span(self, job: str) -> tuple[float, float]:
        """When an ended job began and ended (Slurm's StartTime and EndTime, whole seconds), as Unix times."""
        from datetime import datetime

        shown = dict(
            word.split("=", 1) for word in self.run("scontrol", "show", "job", "-o", job).stdout.split() if "=" in word
        )
        at = [datetime.strptime(shown[key], "%Y-%m-%dT%H:%M:%S").timestamp() for key in ("StartTime", "EndTime")]
        return at[0], at[1]

    def kill_slurmd(self, node: str) -> None:
        """The node lost: its slurmd killed (the steps it started run on, as on a node cut off from its controller)."""
        os.kill(int((self.root / "run" / f"slurmd-{node}.pid").read_text()), signal.SIGKILL)

    def start_slurmd(self, node: str) -> None:
        """The node back: its slurmd started again, until Slurm sees it respond."""
        program = shutil.which("slurmd") or "/usr/sbin/slurmd"
        done = subprocess.run([program, "-f", str(self.conf), "-N", node], env=self.env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        deadline = time.monotonic() + 30
        while "*" in self.run("sinfo", "-h", "-n", node, "-o", "%t").stdout:  # * : not responding
            assert time.monotonic() < deadline, self.run("sinfo", "-N").stdout
            time.sleep(0.3)

    def cancel_all(self) -> None:
        self.run("scancel", "--user", "root")
        deadline = time.monotonic() + 30
        while self.run("squeue", "-h").stdout.strip() and time.monotonic() < deadline:
            time.sleep(0.5)


def _conf(root: Path, munge_socket: Path) -> str:
    ctld, slurmd, n1, n2 = free_port(), free_port(), free_port(), free_port()
    cpus = os.cpu_count() or 1
    return "\n".join(
        [
            "ClusterName=fairwin",
            "SlurmctldHost=localhost",
            f"SlurmctldPort={ctld}",
            f"SlurmdPort={slurmd}",
            "AuthType=auth/munge",
            f"AuthInfo=socket={munge_socket}",
            "CredType=cred/munge",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={root}/state",
            f"SlurmdSpoolDir={root}/spool/%n",
            f"SlurmctldPidFile={root}/run/slurmctld.pid",
            f"SlurmdPidFile={root}/run/slurmd-%n.pid",
            f"SlurmctldLogFile={root}/log/slurmctld.log",
            f"SlurmdLogFile={root}/log/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "ReturnToService=2",
            # Scheduling at most every 0.1 s, and a batch job that cannot start when it is queued (production's,
            # released while the window's node is still completing) tried at the next event, not up to 3 s later
            # (Slurm's batch_sched_delay): production answered 3.24 s after the window's close with the default,
            # 1.36 s without the delay (benchmarks/slurm_times.py, 5 windows each). docs/cluster.md says so.
            "SchedulerParameters=sched_min_interval=100000,batch_sched_delay=0",
            "PreemptType=preempt/partition_prio",
            "PreemptMode=REQUEUE",
            f"NodeName=n1 NodeHostname=localhost Port={n1} CPUs={cpus} State=UNKNOWN",
            f"NodeName=n2 NodeHostname=localhost Port={n2} CPUs={cpus} Features=fast State=UNKNOWN",
            "PartitionName=production Nodes=n1,n2 PriorityTier=1 PreemptMode=REQUEUE MaxTime=INFINITE State=UP",
            # A service partition the benchmark one does not preempt (the same tier): production there is requeued.
            "PartitionName=service Nodes=n1,n2 PriorityTier=10 PreemptMode=OFF MaxTime=INFINITE State=UP",
            "PartitionName=bench Nodes=n1,n2 PriorityTier=10 OverSubscribe=EXCLUSIVE Default=YES MaxTime=INFINITE "
            "State=UP",
            "",
        ]
    )


def _stop(pid_files: list[Path]) -> None:
    """SIGTERM to each daemon at once, then up to 10 s for them all to be gone: munged writes its seed file and
    slurmctld its state as they exit (about 2 s each), and a directory removed before that came back with them (46
    were left in /tmp)."""
    pids = []
    for pid_file in pid_files:
        with contextlib.suppress(OSError, ValueError):
            pid = int(pid_file.read_text().strip())
            os.kill(pid, signal.SIGTERM)
            pids.append(pid)
    deadline = time.monotonic() + 10
    for pid in pids:
        with contextlib.suppress(OSError):  # ProcessLookupError once it is gone
            while time.monotonic() < deadline:
                os.kill(pid, 0)
                time.sleep(0.05)


@contextlib.contextmanager
def started_cluster() -> Iterator[Cluster]:
    """A throwaway cluster on this machine, stopped and removed at the end (benchmarks/slurm_times.py uses it too)."""
    for program in ("munged", "slurmctld", "slurmd"):
        if shutil.which(program) is None and not Path(f"/usr/sbin/{program}").exists():
            missing("Slurm (slurm-wlm and munge)", f"{program} is not on this machine")
    root = Path(tempfile.mkdtemp(prefix="fairwin-slurm-"))
    for part in ("state", "run", "log", *(f"spool/{n}" for n in NODES)):
        (root / part).mkdir(parents=True)
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    socket = root / "munge.sock"
    conf = root / "slurm.conf"
    conf.write_text(_conf(root, socket))
    cluster = Cluster(root, conf)
    started = [
        ["munged", f"--key-file={key}", f"--socket={socket}", f"--pid-file={root}/run/munged.pid",
         f"--log-file={root}/log/munged.log", f"--seed-file={root}/munge.seed", "-f"],
        ["slurmctld", "-f", str(conf)],
        *(["slurmd", "-f", str(conf), "-N", node] for node in NODES),
    ]  # fmt: skip
    try:
        for argv in started:
            program = shutil.which(argv[0]) or f"/usr/sbin/{argv[0]}"
            done = subprocess.run([program, *argv[1:]], env=cluster.env, capture_output=True, text=True, check=False)
            assert done.returncode == 0, f"{argv[0]} did not start: {done.stderr.strip()}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            idle = cluster.run("sinfo", "-h", "-N", "-o", "%N %t").stdout.split("\n")
            if sum(line.endswith("idle") for line in idle) == len(NODES) * 3:  # each node in every partition
                break
            time.sleep(0.3)
        else:
            raise AssertionError(f"the test cluster's nodes never came up: {cluster.run('sinfo').stdout}")
        yield cluster
    finally:
        cluster.cancel_all()
        run = root / "run"
        _stop([*(run / f"slurmd-{n}.pid" for n in NODES), run / "slurmctld.pid", run / "munged.pid"])
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Cluster]:
    with started_cluster() as cluster:
        yield cluster


def in_job(cluster: Cluster, plan: Path, *sbatch: str, run: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """``fairwin run PLAN`` as a Slurm batch job, followed to its end (every 0.2 s: sbatch --wait polls far less
    often); its output and exit code are the job's."""
    out = plan.parent / "job.out"
    command = f"exec {sys.executable} -m fairwin run {plan} --quiet {' '.join(run)}"
    submitted = cluster.run("sbatch", "--parsable", "-o", str(out), *sbatch, "--wrap", command)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    cluster.wait_ended(job)
    code = cluster.exit_code(job)
    return subprocess.CompletedProcess(["sbatch", job], code, out.read_text() if out.exists() else "", "")


def fairwin_on(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """A fairwin command pointed at the test cluster (its SLURM_CONF), outside any job."""
    return forked.run(list(args), env=cluster.env, cwd=None, timeout=300, new_session=False)


def wait_for_begin(plan: Path, step: str, timeout: float = 90) -> Path:
    """The window whose journal shows ``step`` begun."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for journal in (plan.parent / "windows").glob("*/journal.jsonl"):
            if any(e.get("step") == step and e.get("event") == "begin" for e in scan_jsonl(journal)[0]):
                return journal.parent
        time.sleep(0.1)
    raise AssertionError(f"no window reached {step}")


@contextlib.contextmanager
def slurm_production(
    cluster: Cluster, name: str, node: str, partition: str = "production"
) -> Iterator[tuple[str, int]]:
    """A sim production run as a requeue-able Slurm job on ``node``, answering health: its job id and port; cancelled
    at the end, whatever happened."""
    port = free_port()
    command = f"exec {sys.executable} -m fairwin sim --port {port} --model {name}"
    submitted = cluster.run(
        "sbatch", "--parsable", "--requeue", "-p", partition, "-w", node, "-J", name, "-o", "/dev/null",
        "--wrap", command,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    try:
        cluster.wait_running(job)
        wait_healthy(f"http://127.0.0.1:{port}/health")
        yield job, port
    finally:
        cluster.run("scancel", job)


def scheduled_plan(
    make_plan: PlanFactory,
    name: str,
    port: int,
    node: str,
    *flags: str,
    repeats: int = 2,
    chain: dict[str, Any] | None = None,
    **production: Any,
) -> Path:
    """A plan of two sim roles (``flags`` each) whose production is the Slurm job ``name``, on ``node``."""
    flags = flags or ("--ms-per-round", "2")
    plan = make_plan(
        roles={"A": sim_role(*flags, model=f"exp-{name}"), "B": sim_role(*flags, model=f"exp-{name}")},
        window={"repeats": repeats, "warmup_waves_max": 1},
        cells={"c": {"families": ["prose"], "prompt_tokens": 64, "max_tokens": 16, "streams_per_wave": 1}},
        production={"slurm_job": name, "base_url": f"http://127.0.0.1:{port}", "model": name, **WATCH, **production},
        chain=chain,
    )
    plan.write_text(plan.read_text() + f'\n[cluster]\nscheduler = "slurm"\nnodes = ["{node}"]\n')
    return plan


def slow_plan(make_plan: PlanFactory, name: str, port: int, node: str) -> Path:
    """A Slurm production's plan whose starts take about 12 s each, over a minute in all: a fault lands inside."""
    return scheduled_plan(make_plan, name, port, node, "--ms-per-round", "200", repeats=4)
