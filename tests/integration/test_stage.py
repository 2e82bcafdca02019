"""``fairwin stage``: a pinned checkout on its host brought to its commit between windows, its artifacts written
from a commit's tree, a receipt of what the host holds; never over uncommitted work."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from fairwin.files import sha256_bytes
from fairwin.plan.site import Site
from tests.conftest import PlanFactory
from tests.integration.helpers import fairwin
from tests.integration.sshd import SshHosts
from tests.integration.test_hosts import remote_plan


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def two_commits(tmp_path: Path) -> tuple[Path, str, str]:
    """A checkout whose first commit holds the qualified verifier, and whose HEAD has moved on since."""
    repo = tmp_path / "engine-src"
    (repo / "build").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "engine.py").write_text("SPEED = 1\n")
    (repo / "build" / "verifier.so").write_bytes(b"verifier built at the qualified commit\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "qualified")
    qualified = git(repo, "rev-parse", "HEAD")
    (repo / "engine.py").write_text("SPEED = 2\n")
    git(repo, "commit", "-qam", "later")
    return repo, qualified, git(repo, "rev-parse", "HEAD")


def pinned_plan(make_plan: PlanFactory, ssh_hosts: SshHosts, model: str, repo: str) -> Path:
    """A plan whose role B runs on host h2 with this `repo = { ... }` pin (its inline table's inside)."""
    plan = remote_plan(make_plan, ssh_hosts, model)
    plan.write_text(plan.read_text().replace('[roles."B"]\n', f'[roles."B"]\nrepo = {{ {repo} }}\n', 1))
    return plan


def test_stage_brings_the_pinned_checkout_to_its_commit_and_writes_its_artifacts_with_a_receipt(
    make_plan: PlanFactory, ssh_hosts: SshHosts, tmp_path: Path
) -> None:
    repo, qualified, later = two_commits(tmp_path)
    dest = tmp_path / "on-h2" / "opt" / "verifier.so"
    pin = f'path = "{repo}", commit = "{qualified[:10]}", artifacts = {{ "{dest}" = "{qualified}:build/verifier.so" }}'
    plan = pinned_plan(make_plan, ssh_hosts, "staged", pin)
    receipt = tmp_path / "stage.json"
    done = fairwin("stage", str(plan), "--mode", "controlled", "--to", str(receipt))
    assert done.returncode == 0, done.stderr
    assert f"role B on host h2: {repo} at {qualified[:12]} (from {later[:12]})" in done.stdout
    assert git(repo, "rev-parse", "HEAD") == qualified and (repo / "engine.py").read_text() == "SPEED = 1\n"
    content = b"verifier built at the qualified commit\n"
    assert dest.read_bytes() == content
    document = json.loads(receipt.read_text())
    assert document["format"] == "fairwin.stage/1"
    (staged,) = document["checkouts"]
    assert (staged["host"], staged["before"], staged["after"]) == ("h2", later, qualified)
    written = {"from": f"{qualified}:build/verifier.so", "sha256": sha256_bytes(content)}
    assert staged["artifacts"] == {str(dest): written}
    again = fairwin("stage", str(plan), "--receipt", str(receipt))  # the old spelling of --to
    assert again.returncode == 0 and "(already there)" in again.stdout

    (repo / "engine.py").write_text("SPEED = 3\n")  # edited by hand on the host
    dirty = fairwin("stage", str(plan))
    assert dirty.returncode == 4 and dirty.stderr.count("\n") == 1, dirty.stderr
    assert f"role B on host h2: {repo} has uncommitted changes (engine.py); staging never discards work" in dirty.stderr
    assert (repo / "engine.py").read_text() == "SPEED = 3\n"


def test_stage_copies_a_built_file_makes_a_deploy_worktree_and_waits_for_no_window(
    make_plan: PlanFactory, ssh_hosts: SshHosts, tmp_path: Path
) -> None:
    from fairwin.custody.lock import acquire, lock_path, release
    from fairwin.plan import load_plan

    repo, qualified, later = two_commits(tmp_path)
    deploy = tmp_path / "on-h2" / f"deploy-{qualified[:12]}"  # the runbook's per-commit deploy checkout
    built = tmp_path / "on-h2" / "admissions" / "q1" / "worker" / "verifier.so"  # built there, in no commit
    built.parent.mkdir(parents=True)
    built.write_bytes(b"verifier built by admission q1\n")
    dest = tmp_path / "on-h2" / "opt" / "verifier.so"
    pin = f'path = "{deploy}", commit = "{qualified[:10]}", worktree_of = "{repo}", '
    pin += f'artifacts = {{ "{dest}" = "{built}" }}'
    plan = pinned_plan(make_plan, ssh_hosts, "staged-built", pin)
    loaded = load_plan(plan)
    lock = lock_path(Site.of(loaded), loaded.output_dir())
    acquire(lock, "20261204T120000Z-controlled-held", tmp_path / "held-window", "ci")
    try:
        refused = fairwin("stage", str(plan), "--to", str(tmp_path / "refused.json"))
        assert refused.returncode == 4 and refused.stderr.count("\n") == 1, refused.stderr
        assert "20261204T120000Z-controlled-held" in refused.stderr
        assert not deploy.exists() and not dest.exists() and not (tmp_path / "refused.json").exists()
    finally:
        release(lock, "20261204T120000Z-controlled-held")
    receipt = tmp_path / "stage.json"
    done = fairwin("stage", str(plan), "--to", str(receipt))
    assert done.returncode == 0, done.stderr
    assert git(deploy, "rev-parse", "HEAD") == qualified and git(repo, "rev-parse", "HEAD") == later
    assert dest.read_bytes() == built.read_bytes()
    (staged,) = json.loads(receipt.read_text())["checkouts"]
    assert staged["path"] == str(deploy) and staged["after"] == qualified
    assert staged["artifacts"] == {str(dest): {"from": str(built), "sha256": sha256_bytes(built.read_bytes())}}
    assert not lock.exists()  # let go once staged: the next window may start


def test_stage_takes_the_shared_lock_a_window_takes_and_waits_for_another_coordinators_window(
    make_plan: PlanFactory, ssh_hosts: SshHosts, tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a PostgreSQL archive, windows on two coordinators see each other through its hardware locks; so does
    staging: another coordinator's window holding host h2 there refuses `stage`, naming it, and touches nothing;
    once it is gone, stage takes the same lock (a window refused meanwhile) and gives it back."""
    from fairwin.archive.postgres import PostgresArchive
    from fairwin.directory.lock_record import LockRecord
    from fairwin.plan import load_plan
    from fairwin.plan.site import host_keys

    repo, qualified, later = two_commits(tmp_path)
    plan = pinned_plan(make_plan, ssh_hosts, "staged-shared", f'path = "{repo}", commit = "{qualified[:10]}"')
    monkeypatch.setenv("FAIRWIN_ARCHIVE_URL", postgres_url)  # the team's shared archive (its URL holds a password)
    database = PostgresArchive(postgres_url)
    database.migrate()
    keys = host_keys([load_plan(plan).plan.hosts["h2"]])
    elsewhere = LockRecord(
        format="fairwin.lock/1",
        window_id="20261205T090000Z-controlled-elsewhere",
        window_path="/srv/other-coordinator/windows/20261205T090000Z-controlled-elsewhere",
        coordinator="other-coordinator",
        host="other-host",
        pid=1,
        started_unix=1.0,
    )
    assert database.take_hardware(keys, elsewhere) is None
    refused = fairwin("stage", str(plan), "--to", str(tmp_path / "refused.json"))
    assert refused.returncode == 4 and refused.stderr.count("\n") == 1, refused.stderr
    assert "20261205T090000Z-controlled-elsewhere" in refused.stderr and "other-coordinator" in refused.stderr
    assert git(repo, "rev-parse", "HEAD") == later and not (tmp_path / "refused.json").exists()
    database.release_hardware(elsewhere.window_id)
    done = fairwin("stage", str(plan), "--to", str(tmp_path / "stage.json"))
    assert done.returncode == 0, done.stderr
    assert git(repo, "rev-parse", "HEAD") == qualified and database.hardware_holder(keys) is None  # given back
