"""Canary secrets in every channel a plan can give one, and not one byte of them in anything fairwin wrote.

Production and the experiment's servers are `fairwin sim --api-key`, which (as vLLM did) prints its
arguments, the key included, to its log and answers /v1 with 401 without the key; so every request
the window, the watch and the rehearsal make must carry it, and every log must be scrubbed of it.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.conftest import PlanFactory, sim_role
from tests.integration.helpers import SimProcess, fairwin, only_window, processes_with, status
from tests.integration.production import WATCH, killed_inside, start_run
from tests.integration.sshd import SshHosts
from tests.integration.test_hosts import remote_plan
from tests.ports import free_port

KEY_ENV, HF_ENV = "FW_CANARY_API_KEY", "FW_CANARY_HF_TOKEN"
PASS_ENV = "FW_CANARY_SSH_PASSPHRASE"


def keyed(model: str, *flags: str, **overrides: Any) -> dict[str, Any]:
    """A sim role that requires the key, launched with it, and with a token and an env file of secrets.
    Production (P) speculates, as the runbook's does: its rehearsal's control probe (logit_bias) must be refused."""
    return sim_role(
        "--ms-per-round",
        "2",
        *flags,
        "--api-key",
        f"{{env:{KEY_ENV}}}",
        model=model,
        api_key_env=KEY_ENV,
        env={"HF_TOKEN": f"{{env:{HF_ENV}}}", "HF_HOME": "/tmp/hf"},
        env_files=["service.env"],
        **overrides,
    )


def canary_plan(make_plan: PlanFactory, tmp_path: Path, password: str) -> Path:
    (tmp_path / "service.env").write_text(f"SERVICE_PASSWORD={password}\n")
    holder = {"argv": [sys.executable, "-c", "import time; time.sleep(3600)", "hold-canary"], "settle_s": 0.2}
    roles = {
        "A": keyed("exp-canary"),
        "B": keyed("exp-canary"),
        "P": keyed("canary", "--spec-tokens", "2", port=free_port()),
        "C": keyed("exp-canary", "--fault", "exit-at-start"),
    }
    return make_plan(
        roles=roles,
        modes={"broken": {"control": "A", "candidate": "C"}},
        window={"repeats": 2, "warmup_waves_max": 1, "rule": "win2-launch-v1", "report_html": True},
        cells={"c": {"families": ["prose"], "prompt_tokens": 64, "max_tokens": 16, "streams_per_wave": 1}},
        production={"role": "P", **WATCH},
        chain={"placeholders": {"gpu": holder}},
    )


def test_a_literal_secret_is_refused_before_anything_is_written(make_plan: PlanFactory, tmp_path: Path) -> None:
    canary = f"sk-literal-{secrets.token_hex(8)}"
    plan = make_plan(roles={"A": sim_role(env={"OPENAI_API_KEY": canary}), "B": sim_role()})
    for command in (("plan", "check"), ("run",)):
        done = fairwin(*command, str(plan))
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and "roles.A.env.OPENAI_API_KEY holds a literal secret" in done.stderr
        assert canary not in done.stdout + done.stderr
    assert not (tmp_path / "windows").exists()


# Over 30 s: every channel a secret could leak through in one directory (a rehearsal, a window, a failed one, a
# killed one and its recover, a chain and its last window, reports and exports), scanned mid-chain and at the end.
@pytest.mark.slow
def test_no_canary_reaches_any_file_log_receipt_archive_row_or_output(
    make_plan: PlanFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    stop_production: list[Path],
    postgres_url: str,
    scratch_chain_marker: Path,
) -> None:
    canaries = {what: f"canary-{what}-{secrets.token_hex(8)}" for what in ("api-key", "hf-token", "env-file")}
    canaries["db-password"] = str(urlsplit(postgres_url).password)
    monkeypatch.setenv(KEY_ENV, canaries["api-key"])
    monkeypatch.setenv(HF_ENV, canaries["hf-token"])
    monkeypatch.setenv("FAIRWIN_ARCHIVE_URL", postgres_url)
    plan = canary_plan(make_plan, tmp_path, canaries["env-file"])
    stop_production.append(plan)
    outputs: list[str] = []

    def ran(*args: str, code: int = 0) -> None:
        done = fairwin(*args)
        outputs.append(done.stdout + done.stderr)
        assert done.returncode == code, done.stdout + done.stderr

    ran("archive", "migrate")
    ran("production", "up", str(plan), "--watch")
    production = f"http://127.0.0.1:{status_port(plan)}"
    ran("rehearse", str(plan), "--url", production, "--model", "canary", "--out", str(tmp_path / "rehearsal"))
    ran("-v", "run", str(plan), "--quiet")
    ran("run", str(plan), "--mode", "broken", "--quiet", code=3)
    killed = killed_inside(plan, start_run(plan, kill_at="start s2:launched"), "start s2:launched")
    orphan_log = killed / "starts" / "s2" / "server.log"  # the server outlived fairwin: recover must scrub its log
    deadline = time.monotonic() + 20
    while canaries["api-key"] not in orphan_log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert canaries["api-key"] in orphan_log.read_text()
    ran("recover", str(plan))
    assert status(killed)["state"] == "interrupted" and processes_with("exp-canary") == []
    ran("run", str(plan), "--chain", "--quiet")
    assert scratch_chain_marker.is_file()  # mid-chain: the marker, the placeholders' files, production down
    no_canary_in(tmp_path, canaries, outputs)
    ran("run", str(plan), "--chain-last", "--quiet")
    windows = sorted(p for p in (tmp_path / "windows").iterdir() if p.is_dir() and not p.name.startswith("."))
    assert [status(w)["state"] for w in windows].count("complete") == 3
    for window in windows:
        if status(window)["state"] == "complete":
            ran("report", str(window))
    ran("archive", "export", "--to", str(tmp_path / "archive-export.jsonl"))
    exported = {json.loads(line)["window_id"] for line in (tmp_path / "archive-export.jsonl").read_text().splitlines()}
    # Every complete window's controls, and the failed window's first start when it was a finished control (the
    # rule draws each window's order).
    archived = [
        w
        for w in windows
        if status(w)["state"] == "complete"
        or (status(w)["state"] == "failed" and json.loads((w / "window.json").read_text())["order"] == "control-first")
    ]
    assert exported == {w.name for w in archived}
    # The key was used (every /v1 request needed it) and the sim printed it to each log fairwin keeps.
    assert any("non-default args" in p.read_text() for p in tmp_path.rglob("*.log"))

    assert no_canary_in(tmp_path, canaries, outputs) > 50


def no_canary_in(tmp_path: Path, canaries: dict[str, str], outputs: list[str]) -> int:
    """Assert no canary is in any file under the test's directory (the plan's env file aside) or in any command's
    output; returns how many files were read."""
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "service.env"]
    for name, canary in canaries.items():
        for path in written:
            assert canary.encode() not in path.read_bytes(), f"the {name} canary is in {path}"
        for output in outputs:
            assert canary not in output, f"the {name} canary is in a command's output"
    return len(written)


def status_port(plan: Path) -> int:
    from fairwin.plan import load_plan

    port = load_plan(plan).plan.roles["P"].port
    assert isinstance(port, int)
    return port


def test_a_server_that_requires_a_key_refuses_requests_without_it(tmp_path: Path) -> None:
    server = SimProcess("--api-key", "sk-sim-key-123456", "--model", "m")
    try:
        server.wait_healthy()
        import urllib.error
        import urllib.request

        body = b'{"model": "m", "prompt": "hi", "max_tokens": 2}'
        request = urllib.request.Request(
            f"{server.url}/v1/completions", data=body, headers={"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 401
        request.add_header("Authorization", "Bearer sk-sim-key-123456")
        with urllib.request.urlopen(request, timeout=10) as answered:
            assert answered.status == 200
        with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as metrics:  # unprotected, as in vLLM
            assert metrics.status == 200
    finally:
        server.stop()


def encrypted_hosts(make_plan: PlanFactory, ssh: SshHosts, tmp_path: Path, passphrase: str) -> Path:
    """The remote plan of test_hosts, logging in with a copy of the user key encrypted under ``passphrase``."""
    key = tmp_path / "encrypted_key"
    shutil.copy(ssh.key_file, key)
    subprocess.run(["ssh-keygen", "-q", "-p", "-P", "", "-N", passphrase, "-f", str(key)], check=True)
    plan = remote_plan(make_plan, ssh, "ssh-pass")
    text = plan.read_text().replace(
        f"key_file = {json.dumps(str(ssh.key_file))}\n",
        f"key_file = {json.dumps(str(key))}\npassphrase_env = {json.dumps(PASS_ENV)}\n",
    )
    plan.write_text(text)
    assert text.count("passphrase_env") == 2
    return plan


def test_an_encrypted_key_without_its_passphrase_is_refused_in_one_line_before_anything_is_touched(
    make_plan: PlanFactory, ssh_hosts: SshHosts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passphrase = f"canary-passphrase-{secrets.token_hex(8)}"
    plan = encrypted_hosts(make_plan, ssh_hosts, tmp_path, passphrase)
    monkeypatch.delenv(PASS_ENV, raising=False)
    unset = fairwin("run", str(plan), "--quiet")
    assert unset.returncode == 2 and unset.stderr.count("\n") == 1, unset.stderr
    assert f"hosts.h1.passphrase_env = '{PASS_ENV}', but {PASS_ENV} is not set" in unset.stderr
    monkeypatch.setenv(PASS_ENV, "not-the-passphrase")
    wrong = fairwin("run", str(plan), "--quiet")
    assert wrong.returncode != 0 and wrong.stderr.count("\n") == 1, wrong.stderr
    assert "cannot read hosts.h1.key_file" in wrong.stderr and "not-the-passphrase" not in wrong.stderr
    assert not any(p.is_file() for p in (tmp_path / "windows").rglob("*"))


@pytest.mark.slow
def test_a_window_logs_in_with_an_encrypted_key_and_no_file_holds_its_passphrase(
    make_plan: PlanFactory, ssh_hosts: SshHosts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passphrase = f"canary-passphrase-{secrets.token_hex(8)}"
    plan = encrypted_hosts(make_plan, ssh_hosts, tmp_path, passphrase)
    monkeypatch.setenv(PASS_ENV, passphrase)
    done = fairwin("-v", "run", str(plan), "--mode", "controlled", "--quiet")
    assert done.returncode == 0, done.stderr
    assert status(only_window(plan))["state"] == "complete"
    assert passphrase not in done.stdout + done.stderr
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) > 20
    for path in written:
        assert passphrase.encode() not in path.read_bytes(), f"the passphrase is in {path}"
