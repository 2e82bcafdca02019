from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from fairwin.errors import PlanError, RuntimeCheckError
from fairwin.launch.spec import LaunchSpec, make_spec
from fairwin.launch.speculative import effective_speculative, stated_speculative
from fairwin.plan.checks import Runtime
from fairwin.plan.roles import Role
from fairwin.production.runtime_checks import (
    REPORT_WAIT_S,
    await_reported_config,
    check_declared_env,
    check_reported_speculative,
    check_running_env,
    check_speculative,
)

NGRAM = '{"method": "ngram", "num_speculative_tokens": 4}'


def role(**kw: object) -> Role:
    base = {"argv": ["server"], "base_url": "http://127.0.0.1:1", "served_model": "m", "inherit_env": False}
    return Role.model_validate({**base, **kw})


def test_speculative_config_from_vllm_and_sim_arguments() -> None:
    assert effective_speculative(["vllm", "--speculative-config", NGRAM]) == {
        "method": "ngram",
        "num_speculative_tokens": 4,
    }
    assert effective_speculative(["vllm", f"--speculative_config={NGRAM}"])["method"] == "ngram"
    assert effective_speculative(["fairwin", "sim", "--spec-tokens", "3"]) == {
        "method": "sim",
        "num_speculative_tokens": 3,
    }
    assert effective_speculative(["fairwin", "sim", "--spec-tokens", "0"]) == {}
    assert effective_speculative(["vllm", "--model", "m"]) == {}
    with pytest.raises(PlanError, match="is not JSON"):
        effective_speculative(["vllm", "--speculative-config", "{method: ngram"])


def test_speculative_config_from_llama_server_arguments() -> None:
    server = ["llama-server", "-m", "tiny.gguf", "--port", "8080"]
    ngram = [*server, "--spec-type", "ngram-map-k", "--spec-ngram-map-k-size-n", "2", "--spec-draft-n-max=4", "-t", "2"]
    assert stated_speculative(ngram) == {
        "method": "ngram-map-k",
        "spec-ngram-map-k-size-n": "2",
        "spec-draft-n-max": "4",
    }
    # A draft model under any of its three names, the type left to the server (a draft model's own).
    assert stated_speculative([*server, "-md", "draft.gguf"]) == {"method": "draft", "spec-draft-model": "draft.gguf"}
    assert stated_speculative([*server, "--model-draft=d.gguf"]) == stated_speculative([*server, "-md", "d.gguf"])
    assert stated_speculative([*server, "--spec-type", "none"]) == {}  # stated: no speculation
    assert stated_speculative(server) is None  # nothing stated: only the server can tell (LLAMA_ARG_* env)
    with pytest.raises(PlanError, match="--spec-draft-n-max needs a value"):
        stated_speculative([*server, "--spec-type", "ngram-mod", "--spec-draft-n-max"])


def test_llama_cpps_synthetic_acceptance_is_not_standard_verification() -> None:
    synthetic = ["llama-server", "--spec-type", "draft-simple", "-md", "d.gguf", "--spec-synth-len", "3.5"]
    refused = r"sets spec-synth-len: llama.cpp's synthetic acceptance, .* read at launch"
    with pytest.raises(RuntimeCheckError, match=refused):
        check_speculative("B", None, synthetic, standard=True)
    assert check_speculative("B", None, synthetic, standard=False)["spec-synth-len"] == "3.5"


def test_declared_speculative_config_must_match_field_by_field() -> None:
    argv = ["vllm", "--speculative-config", NGRAM]
    assert check_speculative("B", {"method": "ngram", "num_speculative_tokens": 4}, argv, standard=True)
    with pytest.raises(RuntimeCheckError, match="field 'num_speculative_tokens' is 4 at launch, the role declares 5"):
        check_speculative("B", {"method": "ngram", "num_speculative_tokens": 5}, argv, standard=False)
    # An argv that states no config (a wrapper may add one) is left to what the server reports at its start.
    assert check_speculative("A", {"method": "ngram", "num_speculative_tokens": 4}, ["vllm"], standard=False) == {}
    assert check_speculative("A", {}, ["vllm", "--speculative-config", "{}"], standard=True) == {}
    assert check_speculative("A", None, argv, standard=False)  # not declared: not checked


def test_standard_verification() -> None:
    synthetic = ["vllm", "--speculative-config", '{"method": "ngram", "rejection_sample_method": "synthetic"}']
    refused = r"rejection_sample_method 'synthetic'; the plan requires standard .*, read at launch"
    with pytest.raises(RuntimeCheckError, match=refused):
        check_speculative("B", None, synthetic, standard=True)
    assert check_speculative("B", None, synthetic, standard=False)
    explicit = ["vllm", "--speculative-config", '{"method": "ngram", "rejection_sample_method": "standard"}']
    assert check_speculative("B", None, explicit, standard=True)


def test_derived_role_may_differ_from_its_base_only_where_allowed(tmp_path: Path) -> None:
    roles = {
        "PROD": role(env={"POLICY": "adaptive", "K": "5", "SHARED": "1"}),
        "P": role(base="PROD", unset_env=["K"], env={"TRACE": "/mnt/trace"}, allowed_env_differences=["K", "TRACE"]),
        "Q": role(base="PROD", env={"POLICY": "fixed"}, allowed_env_differences=["TRACE"]),
    }
    spec = make_spec("P", roles, tmp_path)
    assert spec.declared_env == {"POLICY": "adaptive", "SHARED": "1", "TRACE": "/mnt/trace"}
    check_declared_env(spec)
    with pytest.raises(RuntimeCheckError, match="differs from base role PROD in POLICY, which allowed_env_differences"):
        check_declared_env(make_spec("Q", roles, tmp_path))


def test_running_env_must_equal_the_declared_one(tmp_path: Path) -> None:
    spec = make_spec("A", {"A": role(env={"X": "1"})}, tmp_path)
    assert check_running_env(spec, dict(spec.env)) == []
    with pytest.raises(RuntimeCheckError, match="differs from the declared one in SURPRISE"):
        check_running_env(spec, {**spec.env, "SURPRISE": "1"})
    with pytest.raises(RuntimeCheckError, match="in X;"):
        check_running_env(spec, {k: v for k, v in spec.env.items() if k != "X"})
    assert "not checked" in check_running_env(spec, None)[0]


@pytest.mark.parametrize("value", ["four", "", "-1", "2.5"])
def test_spec_tokens_that_are_not_a_count_are_refused_in_one_line(value: str) -> None:
    with pytest.raises(PlanError, match="--spec-tokens must be a whole number of draft tokens"):
        effective_speculative(["fairwin", "sim", "--spec-tokens", value])


def _boxed(*argv: str) -> Role:
    return Role.model_validate(
        {
            "argv": list(argv),
            "base_url": "http://127.0.0.1:{port}",
            "port": 8000,
            "served_model": "m",
            "container": {"image": "img:1"},
        }
    )


async def _late_line(log: Path, after_s: float) -> None:
    await asyncio.sleep(after_s)
    log.write_text("fairwin sim: non-default args: {'model': 'm'}\n")


@pytest.mark.timeout(30)
def test_a_copied_log_is_awaited_for_its_config_line_and_a_direct_one_is_not(tmp_path: Path) -> None:
    # A container's log reaches the start's log a moment after the server wrote it: the check waits for its
    # 'non-default args' line (here 0.3 s late) instead of calling the config unobservable.
    log = tmp_path / "server.log"
    boxed = make_spec("A", {"A": _boxed("sim", "--port", "{port}")}, tmp_path)

    async def awaited(spec: LaunchSpec) -> float:
        writer = asyncio.create_task(_late_line(log, 0.3))
        t0 = time.monotonic()
        await await_reported_config(spec, log)
        waited = time.monotonic() - t0
        await writer
        return waited

    assert 0.3 <= asyncio.run(awaited(boxed)) < 1.0
    assert check_reported_speculative(boxed, log, None, Runtime(), None) == ({}, "server log")
    log.unlink()
    # A log written here directly, or an argv that states the config: nothing to wait for.
    assert asyncio.run(awaited(make_spec("A", {"A": role()}, tmp_path))) < 0.1
    log.unlink()
    stated = make_spec("A", {"A": _boxed("sim", "--port", "{port}", "--spec-tokens", "2")}, tmp_path)
    assert asyncio.run(awaited(stated)) < 0.1


@pytest.mark.timeout(30)
def test_a_copied_log_without_the_line_is_refused_after_the_wait(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("starting\n")
    boxed = make_spec("A", {"A": _boxed("sim", "--port", "{port}")}, tmp_path)
    t0 = time.monotonic()
    asyncio.run(await_reported_config(boxed, log))
    assert time.monotonic() - t0 >= REPORT_WAIT_S
    with pytest.raises(RuntimeCheckError, match="its speculative config cannot be observed"):
        check_reported_speculative(boxed, log, None, Runtime(), None)
