"""Production as it runs: read from its real processes before the take-down, and a role derived from it compared
with that reading (its head, its workers, here and on a loopback SSH host), not with the plan's words."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from fairwin.errors import ProductionError
from fairwin.launch.ssh import blocking, run_once
from fairwin.plan.hosts import Host, resolved
from fairwin.plan.production import LiveProcess
from fairwin.production.live import read_member
from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import fairwin, only_window
from tests.integration.production import WATCH, production_state
from tests.integration.sshd import SshHosts
from tests.integration.test_hosts import with_hosts
from tests.ports import free_port

CELLS = {"c": {"families": ["prose"], "prompt_tokens": 64, "max_tokens": 16, "streams_per_wave": 1}}


def live_plan(
    make_plan: PlanFactory,
    model: str,
    port: int,
    production_of: str,
    name: str = "plan.toml",
    production: dict[str, Any] | None = None,
    **roles: Any,
) -> Path:
    """Production P (a sim declaring PRODUCTION_OF), and PP: production's policy on the experiment's runtime."""
    return make_plan(
        roles={
            "B": sim_role("--ms-per-round", "2", model=f"exp-{model}"),
            "P": sim_role(model=model, port=port, env={"PRODUCTION_OF": production_of}),
            "PP": sim_role(
                "--ms-per-round",
                "2",
                model=f"exp-{model}",
                base="P",
                allowed_env_differences=["EXPERIMENT"],
                env={"EXPERIMENT": "pp"},
            ),
            **roles,
        },
        modes={"policy": {"control": "PP", "candidate": "B"}},
        window={"repeats": 2, "warmup_waves_max": 1},
        cells=CELLS,
        production={"role": "P", **WATCH, **(production or {})},
        name=name,
    )


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@pytest.fixture
def down_after() -> Iterator[list[Path]]:
    plans: list[Path] = []
    yield plans
    for plan in plans:
        fairwin("production", "down", str(plan))


@pytest.mark.slow  # in make test; test-fast keeps the quicker cases of the same feature
def test_a_role_derived_from_a_production_that_drifted_is_refused_before_the_take_down_naming_the_live_value(
    make_plan: PlanFactory, down_after: list[Path]
) -> None:
    port = free_port()
    # Production launched as the plan said then; the plan has been edited since (its env), production not.
    plan = live_plan(make_plan, "prod-drift", port, "drifted-by-hand")
    down_after.append(plan)
    up = fairwin("production", "up", str(plan))
    assert up.returncode == 0, up.stderr
    plan = live_plan(make_plan, "prod-drift", port, "team")  # the same file: production as it runs differs
    done = fairwin("run", str(plan), "--mode", "policy")
    assert done.returncode == 4, done.stdout + done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert "before production is taken down" in line and "PRODUCTION_OF" in line, line
    assert "production runs PRODUCTION_OF='drifted-by-hand'" in line and "PRODUCTION_OF='team'" in line, line
    assert healthy(port)  # never touched
    assert [p for p in (plan.parent / "windows").iterdir() if not p.name.startswith(".")] == []
    kept = json.loads((production_state(plan) / "live.json").read_text())
    assert kept["format"] == "fairwin.production-live/1"
    head = kept["members"][0]
    assert head["member"] == "head" and head["env"]["PRODUCTION_OF"] == "drifted-by-hand"
    assert head["found_by"].endswith("(fairwin launched it)") and "--model" in head["argv"]

    # Production brought back as the plan declares it: the window runs, names the change since the last
    # reading, and every start of PP is compared with production's head.
    assert fairwin("production", "down", str(plan)).returncode == 0
    assert fairwin("production", "up", str(plan)).returncode == 0
    done = fairwin("run", str(plan), "--mode", "policy")
    assert done.returncode in (0, 1), done.stdout + done.stderr  # a verdict, whichever
    said = done.stdout + done.stderr
    assert "production changed since its last reading" in said and "head: env PRODUCTION_OF" in said, said
    window = only_window(plan)
    manifest = json.loads((window / "window.json").read_text())
    assert manifest["production"]["live"]["changed_since_last"] == ["head: env PRODUCTION_OF"]
    for start in ("s1", "s3"):  # the PP starts (control-first under win2-v1)
        receipt = json.loads((window / "starts" / start / "start.json").read_text())
        assert receipt["role"] == "PP"
        assert any("matches production's head" in note for note in receipt["env_check"]), receipt["env_check"]
    assert healthy(port)


def test_a_worker_of_the_derived_role_differing_from_productions_worker_is_refused(
    make_plan: PlanFactory, ssh_hosts: SshHosts, down_after: list[Path]
) -> None:
    """Production's worker runs on h1 (started there over SSH, in its login environment); PP's worker would run
    there with another WORKER_BUILD: refused before the take-down, naming both values."""
    port, marker = free_port(), f"live-worker-{os.getpid()}"
    sleep = [sys.executable, "-c", "import time; time.sleep(120)"]
    h1 = resolved(Host.model_validate(ssh_hosts.plan_hosts()["h1"]), Path("/"))
    started = (
        f"setsid --fork env PRODUCTION_OF=team WORKER_BUILD=prod-7 {shlex.join([*sleep, marker])} "
        "> /dev/null 2>&1 < /dev/null"
    )
    assert blocking(run_once("h1", h1, started, retry="action")).exit_status == 0
    try:
        pp_worker = {"host": "h1", "argv": [*sleep, "exp-worker"], "env": {"WORKER_BUILD": "exp-9"}}
        plan = live_plan(
            make_plan,
            "prod-worker",
            port,
            "team",
            production={"live": {"workers": [{"host": "h1", "match": marker}]}},
            PP=sim_role("--ms-per-round", "2", model="exp-prod-worker", base="P", workers=[pp_worker]),
        )
        plan = with_hosts(plan, ssh_hosts)
        down_after.append(plan)
        assert fairwin("production", "up", str(plan)).returncode == 0
        done = fairwin("run", str(plan), "--mode", "policy")
        assert done.returncode == 4, done.stdout + done.stderr
        line = done.stderr.strip().splitlines()[-1]
        assert "role PP worker 1 on host h1" in line and "production's worker 1 on host h1" in line, line
        assert "production runs WORKER_BUILD='prod-7', role PP worker 1 on host h1 WORKER_BUILD='exp-9'" in line
        assert f"match '{marker}'" in line and healthy(port)
    finally:
        for process in psutil.process_iter(["cmdline"]):
            if marker in (process.info["cmdline"] or []):
                process.kill()


@pytest.mark.slow
def test_a_derived_role_on_a_remote_host_with_that_hosts_login_environment_passes(
    make_plan: PlanFactory,
    ssh_hosts: SshHosts,
    down_after: list[Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Production and PP on h1: PP's whole environment is h1's login one plus the plan's, as production's is;
    the coordinator's own variables never enter the comparison."""
    port, pp_port = free_port(), free_port()
    plan = live_plan(
        make_plan,
        "h1-live-prod",
        port,
        "team",
        production={"remote_dir": str(tmp_path / "on-h1")},
        P=sim_role(model="h1-live-prod", port=port, host="h1", env={"PRODUCTION_OF": "team"}),
        PP=sim_role(
            "--ms-per-round",
            "2",
            model="exp-h1-live-prod",
            port=pp_port,
            host="h1",
            base="P",
            allowed_env_differences=["EXPERIMENT"],
            env={"EXPERIMENT": "pp"},
        ),
    )
    plan = with_hosts(plan, ssh_hosts)
    down_after.append(plan)
    monkeypatch.setenv("COORDINATOR_ONLY", "1")  # fairwin's own variable: never on h1, never compared
    assert fairwin("production", "up", str(plan)).returncode == 0
    done = fairwin("run", str(plan), "--mode", "policy")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    window = only_window(plan)
    live = json.loads((window / "window.json").read_text())["production"]["live"]
    assert live["members"][0]["host"] == "h1" and "COORDINATOR_ONLY" not in live["members"][0]["env"]
    receipt = json.loads((window / "starts" / "s1" / "start.json").read_text())
    assert receipt["role"] == "PP" and receipt["host"] == "h1"
    assert "matches production's head on host h1 beyond its allowed differences" in receipt["env_check"]


def test_a_container_production_is_read_through_its_runtimes_inspect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in `docker` on PATH answers `docker inspect --type container NAME` with inspect's JSON shape."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "containers" / "docker-inspect-vllm.json"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(
        f'#!/bin/sh\n[ "$1 $2 $3 $4" = "inspect --type container vllm-head" ] && exec cat {fixture}\n'
        '[ "$1 $2" = "logs vllm-head" ] && echo "INFO non-default args: '
        "{'model': 'm', 'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 3}}\" >&2 && exit 0\n"
        'echo "Error: No such container: $4" >&2; exit 1\n'
    )
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    head = asyncio.run(read_member("head", (None, None), LiveProcess(container="vllm-head"), None))
    assert head.found_by == "container vllm-head (docker)" and head.env["VLLM_DSV41_ADAPTIVE_K"] == "1"
    assert head.env["HF_TOKEN"].startswith("sha256:")
    assert "hf_secret_value" not in json.dumps(head.model_dump(mode="json"))
    # What its server logged (on stderr, as vLLM logs) wins over its argv's 5: an entrypoint may rewrite it.
    assert head.speculative == {"method": "mtp", "num_speculative_tokens": 3}
    assert head.speculative_source == "server log"
    assert "sk-live-123" not in head.argv and head.mounts is not None and len(head.mounts) == 2
    with pytest.raises(ProductionError, match="container other here could not be inspected"):
        asyncio.run(read_member("head", (None, None), LiveProcess(container="other"), None))


@pytest.mark.slow  # in make test; test-fast keeps the quicker cases of the same feature
def test_productions_config_is_read_from_its_servers_log_not_its_wrappers_argv(
    make_plan: PlanFactory, down_after: list[Path]
) -> None:
    """Production's wrapper adds its speculation from SPEC_OVERRIDE (its argv states none): read from the line
    its server logged, a derived role that does not speculate is refused naming the field; a production whose
    server logs nothing is refused before the take-down, unless the plan accepts it unobserved."""
    from tests.integration.test_identity import _wrapped

    def wrapper(model: str, port: int, execs: bool, to: str = "") -> dict[str, Any]:
        """Production's wrapper: one that execs its server leaves the pid fairwin launched running the server's
        command line (which then states its config); one that stays its parent keeps its own."""
        role = {**_wrapped(model, port=port), "port": port}
        command = role["argv"][-1] if execs else role["argv"][-1].removeprefix("exec ")
        role["argv"] = [*role["argv"][:-1], command + to]
        return role

    port = free_port()
    plan = live_plan(make_plan, "prod-wrapped", port, "team", P=wrapper("prod-wrapped", port, execs=True))
    down_after.append(plan)
    assert fairwin("production", "up", str(plan)).returncode == 0
    done = fairwin("run", str(plan), "--mode", "policy", "--quiet")
    assert done.returncode == 3, done.stderr
    assert "role PP: speculative config field 'method' is None as the server reports it" not in done.stderr
    assert "role PP: speculative config field 'method' is None; production's head runs 'sim'" in done.stderr
    manifest = json.loads((only_window(plan) / "window.json").read_text())
    head = manifest["production"]["live"]["members"][0]
    assert head["speculative"] == {"method": "sim", "num_speculative_tokens": 2}
    assert head["speculative_source"] == "server log"
    assert healthy(port)  # given back
    assert fairwin("production", "down", str(plan)).returncode == 0

    silent = wrapper("prod-silent", port, execs=False, to=" >/dev/null 2>&1")  # nothing states its config
    quiet_plan = live_plan(make_plan, "prod-silent", port, "team", name="silent.toml", P=silent)
    down_after.append(quiet_plan)
    assert fairwin("production", "up", str(quiet_plan)).returncode == 0
    refused = fairwin("run", str(quiet_plan), "--mode", "policy", "--quiet")  # production's state: in windows/
    assert refused.returncode == 4, refused.stderr
    assert "before production is taken down: role PP: production's head's speculative config cannot be observed" in (
        refused.stderr
    )
    assert [p.name for p in (plan.parent / "windows").iterdir() if p.is_dir() and p.name[0] != "."] == [
        only_window(plan).name  # the first plan's window, and no other
    ]
    assert healthy(port)
    # Accepted unobserved: the window runs, and its decision says what P was compared with (nothing).
    quiet_plan.write_text(quiet_plan.read_text() + '\n[runtime]\naccept_unobserved = ["speculative"]\n')
    done = fairwin("run", str(quiet_plan), "--mode", "policy", "--quiet", "--out", str(plan.parent / "windows"))
    assert done.returncode in (0, 1), done.stderr
    window = max((p for p in (plan.parent / "windows").iterdir() if p.is_dir() and p.name[0] != "."), key=str)
    decision = json.loads((window / "decision.json").read_text())
    assert (
        "speculative config of production's head (no server log line, no argv): role(s) PP compared with it "
        "compared nothing; accepted by runtime.accept_unobserved"
    ) in decision["unobserved"], decision["unobserved"]


def test_productions_config_is_read_from_its_current_run_only_never_a_line_an_earlier_run_left(
    tmp_path: Path,
) -> None:
    """Production's own log file holds the 'non-default args' line of its previous run; it restarted and has not
    logged yet: its config is unread (and so named, or refused, by the checks), not read from the old run. Once
    the running process writes its own line, that line is what it runs."""
    import subprocess
    import time

    from fairwin.production.live import _reported_line

    log = tmp_path / "production.log"
    old = "INFO non-default args: {'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 3}}\n"
    log.write_text(old)
    an_hour_ago = time.time() - 3600
    os.utime(log, (an_hour_ago, an_hour_ago))  # written by the run before this one
    process = LiveProcess(match="restarted-production", log=str(log))
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "restarted-production"])
    try:
        assert asyncio.run(_reported_line((None, None), process, None, running.pid)) == ""
        new = "INFO non-default args: {'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 5}}"
        with log.open("a") as handle:
            handle.write(new + "\n")
        assert asyncio.run(_reported_line((None, None), process, None, running.pid)).strip() == new
    finally:
        running.kill()
        running.wait()
