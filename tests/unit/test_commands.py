"""The command seam (fairwin/commands.py): a test's runner answers every command run here, in order."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from fairwin.commands import Ran, runner, using
from fairwin.directory.environment import GitState, git_state
from fairwin.gates.qualify import GitFailed, git
from fairwin.launch.shell import shell


@dataclass
class Answering:
    """A runner that answers each command from a script and records what was asked, with where."""

    answers: dict[tuple[str, ...], Ran]
    asked: list[tuple[tuple[str, ...], Path | None]] = field(default_factory=list)

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        output: IO[bytes] | None = None,
    ) -> Ran:
        self.asked.append((tuple(argv), cwd))
        return self.answers[tuple(argv)]

    async def run_async(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout_s: float, merge_stderr: bool
    ) -> Ran:
        return self.run(argv)

    async def stream(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> asyncio.subprocess.Process:
        raise AssertionError(f"not expected to follow {argv}")

    def spawn(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None, cwd: Path | None, output: IO[bytes]
    ) -> subprocess.Popen[bytes]:
        raise AssertionError(f"not expected to start {argv}")


def test_the_windows_git_state_is_what_git_answers_asked_in_order(tmp_path: Path) -> None:
    fake = Answering(
        {
            ("git", "rev-parse", "HEAD"): Ran(0, "0123abcd\n"),
            ("git", "status", "--porcelain", "--untracked-files=no"): Ran(0, " M src/x.py\n"),
        }
    )
    with using(fake):
        assert git_state(tmp_path) == GitState(commit="0123abcd", dirty=True)
    assert fake.asked == [
        (("git", "rev-parse", "HEAD"), tmp_path),
        (("git", "status", "--porcelain", "--untracked-files=no"), tmp_path),
    ]
    assert runner() is not fake  # let go after the block


def test_a_git_that_fails_outside_a_work_tree_leaves_the_state_empty(tmp_path: Path) -> None:
    fake = Answering({("git", "rev-parse", "HEAD"): Ran(128, "", "fatal: not a git repository\n")})
    with using(fake):
        assert git_state(tmp_path) == GitState()
        with pytest.raises(GitFailed, match=r"git rev-parse HEAD failed in .*: \['fatal: not a git repository'\]"):
            git(tmp_path, "rev-parse", "HEAD")


def test_a_shell_command_here_is_run_by_sh_through_the_seam() -> None:
    fake = Answering({("sh", "-c", "nproc"): Ran(0, "4\n")})
    with using(fake):
        assert asyncio.run(shell(None, None, "nproc", retry="read")) == (0, "4\n")
    assert fake.asked == [(("sh", "-c", "nproc"), None)]


def test_a_slurm_allocation_is_read_with_slurms_own_commands_and_a_silent_slurm_refuses() -> None:
    from fairwin.custody.slurm import allocation_problems
    from fairwin.plan.cluster import ClusterSettings

    cluster = ClusterSettings(scheduler="slurm", nodes=["n1", "n2"])
    job = "JobId=7 JobName=w Partition=bench NodeList=n[1-2] OverSubscribe=NO JobState=RUNNING"
    fake = Answering(
        {
            ("scontrol", "show", "job", "-o", "7"): Ran(0, job + "\n"),
            ("scontrol", "show", "hostnames", "n[1-2]"): Ran(0, "n1\nn2\n"),
        }
    )
    with using(fake):
        found, problems = allocation_problems(cluster, {"SLURM_JOB_ID": "7"})
    assert problems == [] and found is not None
    assert (found.job_id, found.partition, found.nodes, found.exclusive) == ("7", "bench", ["n1", "n2"], True)
    assert [argv for argv, _ in fake.asked] == [
        ("scontrol", "show", "job", "-o", "7"),
        ("scontrol", "show", "hostnames", "n[1-2]"),
    ]
    silent = Answering(
        {
            ("scontrol", "show", "job", "-o", "7"): Ran(
                1, "", "slurm_load_jobs error: Unable to contact slurm controller\n"
            )
        }
    )
    with using(silent):
        found, problems = allocation_problems(cluster, {"SLURM_JOB_ID": "7"})
    assert found is None and problems == [
        "Slurm job 7's allocation cannot be read: `scontrol show job -o 7` failed: slurm_load_jobs error: Unable to "
        "contact slurm controller"
    ]


def _production_job(state: str, reason: str, requeue: str = "1", nodes: str = "(null)") -> Answering:
    shown = f"JobId=12 JobName=prod JobState={state} Reason={reason} Requeue={requeue} Restarts=1 NodeList={nodes}"
    return Answering(
        {
            ("squeue", "-h", "--name", "prod", "-o", "%i"): Ran(0, "12\n"),
            ("scontrol", "show", "job", "-o", "12"): Ran(0, shown + "\n"),
            ("scontrol", "show", "hostnames", "n1"): Ran(0, "n1\n"),
            ("scontrol", "requeue", "12"): Ran(0, ""),
        }
    )


def test_a_slurm_production_preempted_for_the_window_is_found_down_and_one_slurm_will_not_requeue_is_refused() -> None:
    from fairwin.errors import ProductionError
    from fairwin.production.scheduled import ScheduledProduction

    production = ScheduledProduction("prod", ["n1"])
    with using(_production_job("PENDING", "BeginTime")):
        said = asyncio.run(production.take_down(1.0))
    assert said == "taken down by Slurm: Slurm job 12 (prod) PENDING (BeginTime), restarted 1 time(s)"
    never_back = _production_job("PENDING", "BeginTime", requeue="0")
    with using(never_back), pytest.raises(ProductionError, match="cannot be requeued: Slurm would not give it back"):
        asyncio.run(production.take_down(1.0))
    assert ("scontrol", "requeue", "12") not in [argv for argv, _ in never_back.asked]


def test_a_slurm_production_still_on_the_window_s_node_is_requeued_and_released_after() -> None:
    from fairwin.errors import ProductionError
    from fairwin.production.scheduled import ScheduledProduction

    production = ScheduledProduction("prod", ["n1"])
    running = _production_job("RUNNING", "None", nodes="n1")
    with using(running), pytest.raises(ProductionError, match=r"still runs 0\.1 s after scontrol requeue"):
        asyncio.run(production.take_down(0.1))  # the fake never leaves the node: the wait ends, refused
    assert ("scontrol", "requeue", "12") in [argv for argv, _ in running.asked]
    waiting = _production_job("PENDING", "BeginTime")
    waiting.answers[("scontrol", "update", "JobId=12", "StartTime=now")] = Ran(0, "")
    with using(waiting):
        said = production.release()
    assert said.endswith(": released to run when the window's job ends (StartTime=now)")


def test_a_production_launched_inside_a_slurm_job_must_be_able_to_outlive_it() -> None:
    from fairwin.custody.slurm import production_outlives_job

    config = ("scontrol", "show", "config")
    said = []
    for answer in (
        Ran(0, "Configuration data as of 2026-12-06\nProctrackType           = proctrack/linuxproc\n"),
        Ran(0, "ProctrackType           = proctrack/cgroup\nTaskPlugin              = task/cgroup\n"),
        Ran(1, "", "slurm_load_ctl_conf error: Unable to contact slurm controller\n"),
    ):
        with using(Answering({config: answer})):
            said.append(production_outlives_job("P", "7"))
    assert said == [
        [],
        [
            "production (role P) would be launched on the window's node, inside Slurm job 7, and the cluster tracks "
            "processes with proctrack/cgroup: the job's end would end production after fairwin restored it; run "
            "production as a Slurm job (production.slurm_job), or on a [hosts.NAME] off the cluster"
        ],
        [
            "the cluster's process tracking cannot be read (`scontrol show config` failed: slurm_load_ctl_conf error: "
            "Unable to contact slurm controller): production is not proved to outlive the job"
        ],
    ]
