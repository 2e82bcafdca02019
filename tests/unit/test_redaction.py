"""Which names, flags and URLs hold secrets; what receipts record; how remembered secrets are scrubbed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from fairwin.errors import PlanError
from fairwin.files import append_jsonl, write_json_atomic
from fairwin.launch.spec import make_spec
from fairwin.plan import load_plan
from fairwin.redaction import (
    ScrubbingFormatter,
    argv_matches,
    is_secret_flag,
    is_secret_name,
    redact_argv,
    remember,
    scrub,
    scrub_file,
)
from tests.conftest import PlanFactory, sim_role


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("OPENAI_API_KEY", True),
        ("HF_TOKEN", True),
        ("PGPASSWORD", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("GOOGLE_APPLICATION_CREDENTIALS_JSON", True),
        ("VLLM_API_KEY", True),
        ("client_secret", True),
        ("TOKENIZERS_PARALLELISM", False),
        ("MAX_NUM_BATCHED_TOKENS", False),
        ("SSL_KEY_FILE", False),
        ("HF_HOME", False),
        ("CUDA_VISIBLE_DEVICES", False),
        ("KEYBOARD", False),
        ("GITHUBTOKEN", True),
        ("KEY_ORDER", False),
        ("COST_PER_TOKEN", False),
        ("SECRET_KEY_BASE", True),
    ],
)
def test_secret_names_are_told_by_their_parts_not_by_substrings(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


@pytest.mark.parametrize(
    ("flag", "secret"),
    [
        ("--api-key", True),
        ("--hf-token", True),
        ("--password=x", True),
        ("--ssl-keyfile", False),
        ("--max-num-batched-tokens", False),
        ("--tokenizer", False),
        ("api-key", False),
        ("--ms-per-draft-token", False),
        ("--return-tokens-as-token-ids", False),
        ("--client-secret", True),
    ],
)
def test_secret_flags(flag: str, secret: bool) -> None:
    assert is_secret_flag(flag) is secret


def test_declared_names_and_public_exceptions_count() -> None:
    assert is_secret_name("MY_MAGIC", extra=["MY_MAGIC"]) and is_secret_flag("--magic", extra=["--magic"])
    assert not is_secret_name("KEY_ORDER", public=["KEY_ORDER"])


def test_argv_values_after_secret_flags_and_url_passwords_are_hidden() -> None:
    argv = [
        "vllm",
        "serve",
        "m",
        "--api-key",
        "sk-1",
        "--hf-token=hf_2",
        "--port",
        "8000",
        "--db",
        "postgresql://fw:pw3@db:5432/x",
        "--ssl-keyfile",
        "/k.pem",
    ]
    assert redact_argv(argv) == [
        "vllm",
        "serve",
        "m",
        "--api-key",
        "***",
        "--hf-token=***",
        "--port",
        "8000",
        "--db",
        "postgresql://fw:***@db:5432/x",
        "--ssl-keyfile",
        "/k.pem",
    ]


def test_a_secret_flag_followed_by_another_flag_is_a_switch_and_hides_nothing(
    make_plan: PlanFactory,
) -> None:
    argv = ["srv", "--use-token", "--port", "8000", "--token", "--x"]
    assert redact_argv(argv) == argv
    plan = make_plan(roles={"A": sim_role("--use-token", "--seed", "1"), "B": sim_role()})
    load_plan(plan)  # no literal secret: --use-token takes no value


def test_a_literal_secret_refusal_says_how_to_declare_a_public_flag(make_plan: PlanFactory) -> None:
    plan = make_plan(roles={"A": sim_role("--session-token", "abc123xyz"), "B": sim_role()})
    with pytest.raises(PlanError, match=r"passes --session-token a literal secret.*\[secrets\] public"):
        load_plan(plan)


def test_a_recorded_argv_matches_the_live_command_line_it_stands_for() -> None:
    recorded = ["python", "-m", "fairwin", "sim", "--api-key", "{env:KEY}", "--x=pre-{env:A}-post"]
    assert argv_matches(recorded, ["python", "-m", "fairwin", "sim", "--api-key", "sk-live", "--x=pre-7-post"])
    assert not argv_matches(recorded, ["python", "-m", "fairwin", "sim", "--api-key", "sk-live", "--x=7"])
    assert not argv_matches(recorded, ["python", "-m", "fairwin", "sim", "--api-key"])
    assert argv_matches(["a", "***"], ["a", "anything"]) and not argv_matches(["a", "b"], ["a", "c"])


def test_remembered_secrets_never_reach_a_file_a_log_line_or_a_message(tmp_path: Path) -> None:
    remember("sk-canary-0123456789", "abc")  # "abc" is too short to remember: scrubbing it would ruin files
    write_json_atomic(tmp_path / "r.json", {"argv": ["--api-key", "sk-canary-0123456789"], "note": "abc"})
    append_jsonl(tmp_path / "j.jsonl", [{"error": "server said sk-canary-0123456789"}])
    for path in (tmp_path / "r.json", tmp_path / "j.jsonl"):
        text = path.read_text()
        assert "sk-canary" not in text and "*" * len("sk-canary-0123456789") in text
    assert '"note": "abc"' in (tmp_path / "r.json").read_text()
    record = logging.LogRecord("fairwin.http", logging.WARNING, __file__, 1, "body %s", ("sk-canary-0123456789",), None)
    assert "sk-canary" not in ScrubbingFormatter("%(message)s").format(record)
    assert scrub("x sk-canary-0123456789 y") == "x " + "*" * 20 + " y"


def test_a_server_log_is_scrubbed_in_place_at_the_same_length(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes("non-default args: {'api_key': 'sk-ünïcode-key'}\nserving\n".encode())
    size = log.stat().st_size
    remember("sk-ünïcode-key")
    assert scrub_file(log) and log.stat().st_size == size
    assert b"sk-" not in log.read_bytes() and log.read_text().endswith("serving\n")
    assert not scrub_file(log)  # nothing left to hide


def test_a_literal_secret_in_a_plan_is_refused_with_where_and_how(make_plan: PlanFactory) -> None:
    cases = {
        'roles.A.env.OPENAI_API_KEY holds a literal secret; write OPENAI_API_KEY = "{env:OPENAI_API_KEY}"': {
            "env": {"OPENAI_API_KEY": "sk-live"}
        },
        "roles.A.argv[8] passes --api-key a literal secret; write --api-key {env:NAME}": {
            "argv": [*sim_role()["argv"], "--api-key", "sk-live"]
        },
        "roles.A.argv[8] passes --api-key a literal secret": {"argv": [*sim_role()["argv"], "--api-key=sk-{env:X}"]},
        "roles.A.env.DB holds a URL with a password": {"env": {"DB": "postgresql://u:hunter2@db/x"}},
    }
    for message, override in cases.items():
        plan = make_plan(roles={"A": sim_role(**override), "B": sim_role()})
        with pytest.raises(PlanError, match=message.replace("[", r"\[").replace("]", r"\]").replace("{", r"\{")):
            load_plan(plan)
    archive = make_plan(window={"archive": "postgresql://fw:pw@db/archive"})
    with pytest.raises(PlanError, match=r"window\.archive holds a database password; give it in PGPASSWORD"):
        load_plan(archive)


def test_placeholders_and_env_files_are_accepted_and_receipts_record_the_plan_s_words(
    make_plan: PlanFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "secrets.env").write_text("SERVICE_PASSWORD=pw-from-file-123\nPLAIN=visible\n")
    monkeypatch.setenv("SIM_KEY", "sk-from-env-4567")
    role = sim_role(env={"OPENAI_API_KEY": "{env:SIM_KEY}", "HF_HOME": "/tmp/hf"}, env_files=["secrets.env"])
    role["argv"] = [*role["argv"], "--api-key", "{env:SIM_KEY}"]
    loaded = load_plan(make_plan(roles={"A": role, "B": sim_role()}))
    spec = make_spec("A", loaded.plan.roles, loaded.base_dir)
    assert spec.argv[-1] == "sk-from-env-4567" and spec.env["SERVICE_PASSWORD"] == "pw-from-file-123"
    assert spec.shown_argv[-2:] == ["--api-key", "{env:SIM_KEY}"]
    assert spec.shown_env == {"OPENAI_API_KEY": "{env:SIM_KEY}", "HF_HOME": "/tmp/hf"}  # env files: never contents
    assert list(spec.env_files) == ["secrets.env"] and len(spec.env_files["secrets.env"]) == 64
    assert "sk-from" not in scrub("sk-from-env-4567") and "pw-from" not in scrub("pw-from-file-123")
    assert scrub("visible") == "visible"  # a value under a name that is not secret stays as it is


def test_a_bugs_traceback_is_printed_without_a_resolved_secret(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fairwin import cli
    from fairwin.cli import _decision

    remember("sk-resolved-in-this-process")

    def broken(_args: object) -> int:
        raise RuntimeError("could not reach https://u:x@h/ with sk-resolved-in-this-process")

    monkeypatch.setattr(_decision, "rules_list", broken)
    assert cli.main(["rules", "list"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "RuntimeError: could not reach" in err
    assert "sk-resolved-in-this-process" not in err and "*" * len("sk-resolved-in-this-process") in err
    assert err.rstrip().endswith("the traceback above is a bug in fairwin; please report it")
