"""Reading production as it runs, and comparing a role with it: the parts that need no process."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairwin.errors import ProductionError, RuntimeCheckError
from fairwin.launch.inspect import parse_inspect
from fairwin.launch.speculative import effective_speculative
from fairwin.plan.checks import Runtime
from fairwin.production.live import (
    LiveMember,
    LiveProduction,
    changes,
    keep,
    oldest_match,
    parse_process,
    stored,
)
from fairwin.production.runtime_checks import check_live_env, check_live_speculative
from fairwin.redaction import fingerprint

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "containers"


def member(env: dict[str, str], **kw: object) -> LiveMember:
    found = {
        "member": "head",
        "host": "spark1",
        "found_by": "pid 7 (fairwin launched it)",
        "argv": ["vllm"],
        "env": env,
        "speculative": {},
    }
    return LiveMember(**{**found, **kw})  # type: ignore[arg-type]


def test_the_oldest_process_holding_the_pattern_is_production_and_the_ps_itself_never_is() -> None:
    listing = (
        "   12    900 vllm serve /models/a --port 8000\n"
        "   40   3600 /usr/bin/python -m vllm serve /models/a --port 8000\n"
        "   77      0 ps -eo pid=,etimes=,args=\n"
        "   78      0 sh -c ps -eo pid=,etimes=,args= vllm serve\n"
    )
    assert oldest_match(listing, "vllm serve") == 40
    assert oldest_match(listing, "sglang") is None


def test_a_process_reading_splits_its_environment_from_its_command_line() -> None:
    env, argv = parse_process("A=1\0B=x=y\0\0FAIRWIN-CMDLINE\0vllm\0serve\0--port\08000\0")
    assert env == {"A": "1", "B": "x=y"} and argv == ["vllm", "serve", "--port", "8000"]


def test_a_containers_env_argv_and_mounts_come_from_its_runtimes_inspect() -> None:
    box = parse_inspect((FIXTURES / "docker-inspect-vllm.json").read_text(), "vllm-head")
    assert box.env["VLLM_DSV41_ADAPTIVE_K"] == "1" and box.env["AK_SCHEDULE"] == "[[1,2,5],[3,4,4]]"
    assert box.argv[:3] == ["vllm", "serve", "/models/dsv41"]
    # Sorted by destination; writable or not from RW (docker's Mode is free text: "" here, "ro" for the models).
    assert box.mounts == [
        {"source": "/srv/trace", "destination": "/mnt/trace", "mode": "rw"},
        {"source": "/srv/models", "destination": "/models", "mode": "ro"},
    ]
    with pytest.raises(ProductionError, match="container web: its runtime's inspect output is not"):
        parse_inspect('{"Id": "x"}', "web")


def test_secrets_are_kept_as_digests_and_compared_by_them(tmp_path: Path) -> None:
    assert fingerprint("HF_TOKEN", "hf_x").startswith("sha256:") and fingerprint("MODE", "a") == "a"
    assert fingerprint("DB", "postgres://u:pw@h/db").startswith("sha256:")
    live = LiveProduction((member({"HF_TOKEN": fingerprint("HF_TOKEN", "old"), "MODE": "a"}),), 1.0)
    keep(tmp_path, live)
    assert "old" not in (tmp_path / "live.json").read_text()
    with pytest.raises(RuntimeCheckError, match=r"in HF_TOKEN: production runs HF_TOKEN=<a secret, sha256:"):
        check_live_env("role P", stored(tmp_path).members[0], {"HF_TOKEN": "new", "MODE": "a"}, [])  # type: ignore[union-attr]
    check_live_env("role P", live.members[0], {"HF_TOKEN": "old", "MODE": "a", "SHLVL": "2", "FAIRWIN_X": "1"}, [])


def test_allowed_differences_pass_and_the_rest_are_named_with_both_values() -> None:
    live = member({"MODE": "a", "K": "5", "SPEC_OVERRIDE": "fixed5"})
    check_live_env("role P", live, {"MODE": "a", "K": "5", "TRACE": "/mnt"}, ["SPEC_OVERRIDE", "TRACE"])
    with pytest.raises(RuntimeCheckError) as caught:
        check_live_env("role P on host h1", live, {"MODE": "b", "K": "5", "SPEC_OVERRIDE": "x"}, ["SPEC_OVERRIDE"])
    assert str(caught.value).startswith(
        "role P on host h1: its environment differs from production's head on host "
        "spark1 (pid 7 (fairwin launched it)) in MODE: production runs MODE='a', "
        "role P on host h1 MODE='b'"
    )


def test_the_speculative_config_must_be_productions_field_by_field() -> None:
    live = member({}, speculative={"method": "mtp", "num_speculative_tokens": 5})
    argv = ["vllm", "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 5}']
    check_live_speculative("role P", live, effective_speculative(argv), Runtime())  # the same: passes
    with pytest.raises(
        RuntimeCheckError, match="field 'num_speculative_tokens' is 4; production's head on host spark1 runs 5"
    ):
        check_live_speculative("role P", live, {"method": "mtp", "num_speculative_tokens": 4}, Runtime())


def test_productions_config_is_what_its_server_logged_and_one_never_observed_is_refused_unless_accepted() -> None:

    from fairwin.production.live import live_member

    logged = (
        "INFO non-default args: {'model': 'm', 'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 3}}"
    )
    wrapped = ["bash", "serve.sh"]  # a wrapper: its argv states no config
    found = live_member("head", None, "pid 7", {}, wrapped, None, logged)
    assert (found.speculative, found.speculative_source) == (
        {"method": "mtp", "num_speculative_tokens": 3},
        "server log",
    )
    with pytest.raises(RuntimeCheckError, match="field 'method' is None; production's head runs 'mtp'"):
        check_live_speculative("role P", found, {}, Runtime())  # P speculates not at all: production does
    unseen = live_member("head", None, "pid 7", {}, wrapped, None, "")
    assert (unseen.speculative, unseen.speculative_source) == ({}, "unobserved")
    with pytest.raises(RuntimeCheckError, match="production's head's speculative config cannot be observed"):
        check_live_speculative("role P", unseen, {}, Runtime())  # {} == {} would have passed, comparing nothing
    check_live_speculative("role P", unseen, {}, Runtime(accept_unobserved=["speculative"]))
    stated = live_member("head", None, "pid 7", {}, ["vllm", "--speculative-config", '{"method": "ngram"}'], None, "")
    assert stated.speculative_source == "argv"
    assert stated.model_copy(update={"argv": []}).speculative == {"method": "ngram"}


def test_what_changed_since_the_last_reading_is_named_per_process() -> None:
    before = LiveProduction((member({"A": "1", "B": "2"}),), 1.0)
    now = LiveProduction(
        (
            member({"A": "1", "B": "3", "C": "4"}, argv=["vllm", "--x"]),
            member({}).model_copy(update={"member": "worker 1"}),
        ),
        2.0,
    )
    assert changes(before, now) == ["head: env B, C; argv", "worker 1: new"]
    assert changes(now, now) == []
