"""A role across hosts, in parts: the plan's rules, the workers' specs, readiness, the journal and the stop order."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from fairwin.directory.journal import JournalRow, servers
from fairwin.directory.start_receipt import StopRecord
from fairwin.errors import HealthTimeoutError, PlanError, ServerExitedError
from fairwin.launch.local import Note
from fairwin.launch.readiness import LogWatch, wait_ready
from fairwin.launch.spec import make_spec, worker_specs
from fairwin.plan.hosts import Host
from fairwin.plan.loading import load_plan
from fairwin.plan.roles import Ready, Role
from fairwin.telemetry.gpu import ComputeProcess, GpuSample, PerHost
from fairwin.telemetry.sampler import Sampler, summarize
from fairwin.window.processes import StartProcess, stop_all
from tests.conftest import PlanFactory, sim_role

HOSTS = {"head": Host(address="10.0.0.1", python="/opt/h/python"), "w1": Host(address="10.0.0.2", python="/opt/w/py")}


def spanning_role(**worker: Any) -> Role:
    return Role.model_validate(
        {
            "argv": ["{python}", "serve", "--port", "{port}"],
            "base_url": "http://10.0.0.1:{port}",
            "port": 8000,
            "served_model": "m",
            "host": "head",
            "env": {"SHARED": "1"},
            "workers": [
                {
                    "host": "w1",
                    "argv": ["{python}", "worker", "--head", "{head_address}:{port}"],
                    "env": {"RANK": "1"},
                    **worker,
                }
            ],
        }
    )


def test_a_worker_gets_the_heads_placeholders_its_own_hosts_python_and_the_roles_env_plus_its_own() -> None:
    roles = {"B": spanning_role()}
    head = make_spec("B", roles, Path("/plans"), HOSTS)
    (spec,) = worker_specs(head, roles, Path("/plans"), HOSTS)
    assert spec.argv == ["/opt/w/py", "worker", "--head", "10.0.0.1:8000"]
    assert spec.declared_env == {"SHARED": "1", "RANK": "1"} and "RANK" not in head.declared_env
    assert (spec.host, spec.member, spec.label) == ("w1", "worker 1", "role B worker 1 on host w1")
    assert spec.remote is not None and spec.remote.address == "10.0.0.2"
    assert head.label == "role B on host head" and spec.base_env is None


@pytest.mark.parametrize(
    ("workers", "message"),
    [
        ([{"host": "nowhere", "argv": ["x"]}], "roles.B.workers[0].host names 'nowhere', which [hosts] does not"),
        ([{"host": "h1", "argv": ["x"]}, {"host": "h1", "argv": ["y"]}], "each need a host of their own"),
        ([{"argv": ["x"], "ready": {"log": "("}}], "is not a regular expression"),
    ],
)
def test_the_plan_refuses_workers_it_cannot_run(make_plan: PlanFactory, workers: list[Any], message: str) -> None:
    plan = make_plan(roles={"A": sim_role(), "B": sim_role(workers=workers)})
    plan.write_text(plan.read_text() + '\n[hosts.h1]\naddress = "127.0.0.1"\n')
    with pytest.raises(PlanError, match=message.replace("[", r"\[").replace("(", r"\(")):
        load_plan(plan)


def test_a_log_line_split_across_two_reads_is_still_found(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    log.write_text("loading...\nengine re")
    watch = LogWatch(log, r"engine ready")
    assert not watch.found()
    with log.open("a") as out:
        out.write("ady\n")
    assert watch.found() and watch.offset == len("loading...\nengine ready\n")


class Fake:
    """A process whose exit and problem the test sets."""

    def __init__(
        self, code: int | None = None, problem: str | None = None, name: str = "", log: list[str] | None = None
    ):
        self.code, self.why, self.name, self.log = code, problem, name, log if log is not None else []

    def exit_code(self) -> int | None:
        return self.code

    def problem(self) -> str | None:
        return self.why

    def report_to(self, note: Note) -> None:
        del note  # nothing happens to it that the start does not see itself

    def described(self) -> dict[str, Any] | None:
        return None

    async def stop(self) -> StopRecord:
        self.log.append(self.name)
        if self.name == "worker 2":
            raise OSError("host w2 unreachable")
        return StopRecord(signal="SIGTERM", returncode=0, seconds=0.0)


def test_readiness_fails_fast_on_an_exit_or_a_lost_connection_and_names_what_is_missing(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    log.write_text("starting\n")
    ready = Ready(log="engine ready", after_s=0, timeout_s=0.2)
    with pytest.raises(ServerExitedError, match="role B worker 1: exited with code 7 before it was ready"):
        asyncio.run(wait_ready(Fake(code=7), ready, log, "role B worker 1", "127.0.0.1"))
    with pytest.raises(ServerExitedError, match="worker 1: the SSH connection was lost before it was ready"):
        asyncio.run(wait_ready(Fake(problem="the SSH connection was lost"), ready, log, "worker 1", "127.0.0.1"))
    with pytest.raises(HealthTimeoutError, match=r"not ready after 0.2 s \(no line matching 'engine ready'"):
        asyncio.run(wait_ready(Fake(), ready, log, "worker 1", "127.0.0.1"))
    log.write_text("engine ready\n")
    assert asyncio.run(wait_ready(Fake(), ready, log, "worker 1", "127.0.0.1")) < 0.2


def test_the_journal_gives_recovery_every_process_of_a_start_not_only_the_last() -> None:
    rows = [
        JournalRow.model_validate({"time": 1.0, **row})
        for row in (
            {"step": "start s2", "event": "launching", "argv": ["w"], "host": "w1", "member": "worker 1"},
            {"step": "start s2", "event": "launched", "argv": ["w"], "host": "w1", "member": "worker 1", "pid": 11},
            {"step": "start s2", "event": "launching", "argv": ["h"], "host": "head"},
        )
    ]
    found = servers(rows)
    assert [(s.pid, s.argv, s.host) for s in found] == [(11, ["w"], "w1"), (None, ["h"], "head")]


def test_the_head_stops_first_then_the_workers_backwards_and_a_failed_stop_stops_no_other() -> None:
    order: list[str] = []
    processes = [
        StartProcess(spec=None, handle=Fake(name=n, log=order), log=Path(n), pins={}, ready=None)  # type: ignore[arg-type]
        for n in ("worker 1", "worker 2", "head")
    ]
    with pytest.raises(OSError, match="host w2 unreachable"):
        asyncio.run(stop_all(processes))
    assert order == ["head", "worker 2", "worker 1"]


def sample(gpu: int, mhz: float, uuid: str = "GPU-same") -> GpuSample:
    return GpuSample(
        time=1.0,
        gpu=gpu,
        uuid=uuid,
        name="H200",
        sm_mhz=mhz,
        max_sm_mhz=1980,
        applications_mhz=None,
        reasons=0x2,
        temperature_c=50,
        power_w=400,
        power_limit_w=700,
    )


class OneGpu:
    def __init__(self, mhz: float) -> None:
        self.name, self.mhz = "nvidia-smi", mhz

    def sample(self) -> list[GpuSample]:
        return [sample(0, self.mhz)]

    def compute_processes(self) -> list[ComputeProcess]:
        return [ComputeProcess(gpu_uuid="GPU-same", pid=5, name="python", used_mib=10.0)]


def test_the_gpus_of_every_host_are_told_apart_and_must_agree_on_the_cap(tmp_path: Path) -> None:
    both = PerHost({"head": OneGpu(1500), "w1": OneGpu(1410)})
    assert [p.host for p in both.compute_processes()] == ["head", "w1"]
    sampler = Sampler(both, tmp_path / "t.jsonl", 1.0)
    sampler.samples = both.sample()
    seen = summarize(sampler, "locked")
    assert seen.cap_by_gpu == {"head/GPU-same": 1500, "w1/GPU-same": 1410} and seen.cap_mhz is None
    assert "the GPUs disagree on the cap" in seen.problems[0]
    sampler.samples = PerHost({"head": OneGpu(1410), "w1": OneGpu(1410)}).sample()
    assert summarize(sampler, "locked").cap_mhz == 1410
