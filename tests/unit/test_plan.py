from __future__ import annotations

import json
from pathlib import Path

import pytest

from fairwin.errors import PinMismatchError, PlanError
from fairwin.files import sha256_file
from fairwin.plan import load_plan, resolve_mode, starts_for, waves_for
from tests.conftest import PlanFactory, sim_role, to_toml


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in plan"
    path.write_text(text.replace(old, new, 1))


def test_valid_plan_loads_with_defaults(make_plan: PlanFactory) -> None:
    loaded = load_plan(make_plan())
    cell = loaded.plan.cells["short-b1"]
    assert (cell.concurrency, cell.temperature, cell.top_p, cell.endpoint) == (1, 1.0, 1.0, "completions")
    assert loaded.plan.window.rule == "win2-v1"
    assert loaded.plan.window.base_seed == 42
    assert set(loaded.plan.all_modes()) == {"controlled"}  # no role P, so no production-policy
    assert len(loaded.families["prose"].ordered) == 6


def one_line_error(exc: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('served_model = "tiny"', "", "roles.A.served_model: 'served_model' is required here; add this key"),
        ("repeats = 3", 'repeats = "three"', "window.repeats: Input should be a valid integer"),
        (
            "repeats = 3",
            "repeats = 3\nrepeat = 4",
            "window.repeat: 'repeat' is not a key here; did you mean 'repeats'?",
        ),
        ("max_tokens = 48", "max_tokens = 48\nzzzq = 1", "cells.short-b1.zzzq: 'zzzq' is not a key here; remove it"),
        # A misspelt key is named with its neighbour, not the key it left missing.
        (
            'served_model = "tiny"',
            'served_modle = "tiny"',
            "roles.A.served_modle: 'served_modle' is not a key here; did you mean 'served_model'?",
        ),
        ("prompt_tokens = 64", "prompt_tokens = -5", "cells.short-b1.prompt_tokens: Input should be greater than 0"),
        # What plan check let through with exit 0, each now one line naming the key and its range.
        ('port = "auto"', "port = 70000", "roles.A.port: must be a TCP port, 1 to 65535, or 'auto' (got 70000)"),
        (
            "max_tokens = 48",
            "max_tokens = 99999999999",
            "cells.short-b1.max_tokens: Input should be less than or equal to 1000000",
        ),
        ("repeats = 3", "repeats = 3\nbase_seed = 12345678901234567890", "window.base_seed: Input should be less than"),
        (
            'output_dir = "windows"',
            'output_dir = "/proc/self/windows"',
            "window.output_dir: /proc/self/windows is under /proc, the kernel's own files: keep windows on a disk",
        ),
        (
            "streams_per_wave = 2",
            "streams_per_wave = 2\nconcurrency = 100000",
            "cells.short-b1: concurrency 100000 is more than the 2 streams a wave sends (streams_per_wave)",
        ),
        ('base_url = "http://127.0.0.1:{port}"', 'base_url = "127.0.0.1:80"', "must start with http://"),
        ('families = ["prose", "code"]', 'families = ["poetry"]', "names 'poetry', which is not declared"),
        ('port = "auto"', "", "uses {port} but sets no `port`"),
        ("max_tokens = 48", "max_tokens = 48\nextra_body = { seed = 1 }", "sets seed, which fairwin controls"),
        ('served_model = "tiny"', 'served_model = "tiny"\ncpus = "0 1"', "roles.A.cpus: '0 1' is not a CPU list"),
        ('served_model = "tiny"', 'served_model = "tiny"\nnice = 25', "roles.A.nice: Input should be less than"),
        ("repeats = 3", 'repeats = 3\nclient_cpus = "x"', "window.client_cpus: 'x' is not a CPU list"),
    ],
)
def test_bad_plans_give_one_line_naming_file_and_key(make_plan: PlanFactory, old: str, new: str, expected: str) -> None:
    path = make_plan()
    edit(path, old, new)
    with pytest.raises(PlanError) as exc:
        load_plan(path)
    message = one_line_error(exc)
    assert message.startswith(str(path))
    assert expected in message


def test_invalid_toml_names_the_line(make_plan: PlanFactory) -> None:
    path = make_plan()
    path.write_text(path.read_text() + "\n[broken\n")
    with pytest.raises(PlanError) as exc:
        load_plan(path)
    assert "invalid TOML" in one_line_error(exc)
    assert "line" in str(exc.value)


def test_missing_plan_file(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="no such plan file"):
        load_plan(tmp_path / "nope.toml")


def test_unknown_role_in_mode(make_plan: PlanFactory) -> None:
    path = make_plan(modes={"mine": {"control": "A", "candidate": "Z"}})
    with pytest.raises(PlanError) as exc:
        load_plan(path)
    assert "modes.mine.candidate names role 'Z', which is not declared; declared roles: A, B" in one_line_error(exc)


def test_order_file_sha_mismatch_refuses(make_plan: PlanFactory) -> None:
    path = make_plan()
    order = path.parent / "prose.order.json"
    doc = json.loads(order.read_text())
    doc["ids"].reverse()
    order.write_text(json.dumps(doc))
    with pytest.raises(PinMismatchError) as exc:
        load_plan(path)
    assert "families.prose.order_sha256" in one_line_error(exc)
    assert "the frozen order changed" in str(exc.value)


def test_prompts_sha_mismatch_refuses(make_plan: PlanFactory) -> None:
    path = make_plan()
    prompts = path.parent / "code.jsonl"
    prompts.write_text(prompts.read_text() + "\n")
    with pytest.raises(PinMismatchError, match=r"families.code.prompts_sha256"):
        load_plan(path)


def test_order_naming_unknown_prompt(make_plan: PlanFactory) -> None:
    path = make_plan()
    order = path.parent / "code.order.json"
    old_sha = sha256_file(order)
    order.write_text(json.dumps({"format": "fairwin.order/1", "family": "code", "ids": ["code-0", "ghost"]}))
    edit(path, old_sha, sha256_file(order))
    with pytest.raises(PlanError, match=r"ids not in .*: ghost"):
        load_plan(path)


def test_registered_mode_missing_its_role(make_plan: PlanFactory) -> None:
    loaded = load_plan(make_plan())
    with pytest.raises(PlanError, match=r"mode 'production-policy' needs role\(s\) P.*add \[roles.P\]"):
        resolve_mode(loaded, "production-policy")
    with pytest.raises(PlanError, match="no mode 'nope'; the plan's modes are: controlled"):
        resolve_mode(loaded, "nope")


def test_bracket_order_and_waves(make_plan: PlanFactory) -> None:
    loaded = load_plan(make_plan())
    starts = starts_for(resolve_mode(loaded, "controlled"))
    assert [(s.name, s.kind, s.role) for s in starts] == [
        ("s1", "control", "A"),
        ("s2", "candidate", "B"),
        ("s3", "control", "A"),
    ]
    waves = waves_for(loaded, "short-b1")
    assert [(w.repeat, w.family, w.seed) for w in waves] == [
        (1, "prose", 42),
        (1, "code", 43),
        (2, "prose", 44),
        (2, "code", 45),
        (3, "prose", 46),
        (3, "code", 47),
    ]
    order = [p.id for p in loaded.families["prose"].ordered]
    assert [p.id for p in waves[0].prompts] == order[0:2]
    assert [p.id for p in waves[2].prompts] == order[2:4]
    assert [p.id for p in waves[4].prompts] == order[4:6]


def test_waves_wrap_around_a_short_family(make_plan: PlanFactory) -> None:
    path = make_plan(
        cells={"c": {"families": ["prose"], "prompt_tokens": 8, "max_tokens": 8, "streams_per_wave": 4}},
    )
    loaded = load_plan(path)
    order = [p.id for p in loaded.families["prose"].ordered]
    waves = waves_for(loaded, "c")
    assert [p.id for p in waves[1].prompts] == [order[4], order[5], order[0], order[1]]


@pytest.mark.parametrize("name", ["sim-window.toml", "vllm-cpu.toml"])
def test_the_shipped_example_plans_load_with_their_pins(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRWIN_ENGINE_PYTHON", "/usr/bin/python3")
    monkeypatch.setenv("FAIRWIN_TINY_MODEL", "/nonexistent/model")
    loaded = load_plan(Path(__file__).resolve().parents[2] / "examples" / name)
    assert loaded.notices == []  # the shipped order files spell their format as `format`


def test_an_order_file_spelling_format_as_schema_still_reads_with_a_notice(tmp_path: Path) -> None:
    from tests.conftest import write_family

    table = write_family(tmp_path, "prose")
    order = tmp_path / table["order"]
    document = json.loads(order.read_text())
    order.write_text(json.dumps({"schema": document.pop("format"), **document}))
    table["order_sha256"] = sha256_file(order)
    plan = tmp_path / "plan.toml"
    plan.write_text(
        to_toml(
            {
                "roles": {"A": sim_role()},
                "families": {"prose": table},
                "cells": {"c": {"families": ["prose"], "prompt_tokens": 64}},
            }
        )
    )
    loaded = load_plan(plan)
    assert loaded.families["prose"].ordered and len(loaded.notices) == 1
    assert "names its format as 'schema'" in loaded.notices[0]


def test_standard_verification_is_required_unless_a_plan_opts_out(make_plan: PlanFactory) -> None:
    from fairwin.plan import load_plan

    assert load_plan(make_plan()).plan.runtime.standard_verification is True
    plan = make_plan(name="opt-out.toml")
    plan.write_text(plan.read_text() + "\n[runtime]\nstandard_verification = false\n")
    assert load_plan(plan).plan.runtime.standard_verification is False


@pytest.mark.parametrize(
    ("roles", "production", "expected"),
    [
        ({"A": sim_role(compare_live=True)}, None, "roles.A.compare_live: there is no live production to compare"),
        (
            {},
            {"up": ["up"], "down": ["down"], "base_url": "http://h:1", "model": "m", "live": {"workers": []}},
            "live.head: production managed elsewhere has no pid fairwin knows",
        ),
        (
            {},
            {"role": "P", "live": {"workers": [{"match": "x", "container": "y"}]}},
            "give either match (a command-line substring) or container (its name)",
        ),
        (
            {},
            {"role": "P", "live": {"workers": [{"host": "nowhere", "match": "x"}]}},
            "production.live.workers[0].host names 'nowhere', which [hosts] does not declare",
        ),
        (
            {},
            {"role": "P", "slurm_job": "prod"},
            "give one of role (fairwin launches production), both up and down (managed elsewhere), or slurm_job",
        ),
        ({}, {"slurm_job": "prod", "model": "m"}, "slurm_job needs base_url and model"),
        (
            {},
            {"slurm_job": "prod", "base_url": "http://h:1", "model": "m"},
            "production.slurm_job: production runs as a Slurm job; declare the [cluster] it runs on",
        ),
    ],
)
def test_production_as_it_runs_is_declared_whole(
    make_plan: PlanFactory, roles: dict[str, object], production: dict[str, object] | None, expected: str
) -> None:
    declared = {"A": sim_role(), "B": sim_role(), "P": sim_role(port=18999), **roles}
    with pytest.raises(PlanError) as exc:
        load_plan(make_plan(roles=declared, production=production))
    assert expected in one_line_error(exc)


BOX = {"image": "localhost/x:1"}


@pytest.mark.parametrize(
    ("role", "chain", "expected"),
    [
        (sim_role(container={**BOX, "mounts": ["/data"]}), None, "'/data': a mount is SOURCE:/destination[:options]"),
        (sim_role(container={**BOX, "run_args": ["--name=x"]}), None, "fairwin sets the container's name, labels"),
        (sim_role(container={**BOX, "run_args": ["-p", "80:80"]}), None, "a container role runs on the host's network"),
        (sim_role(container=BOX, cwd="/srv"), None, "a container's working directory is container.workdir, not cwd"),
        (sim_role(container=BOX, cpus="0"), None, "cpus and nice apply to a process fairwin runs itself"),
        (sim_role(container={**BOX, "workdir": "rel"}), None, "'rel': a container's workdir is an absolute path"),
        (
            sim_role(allowed_mount_differences=["/trace"]),
            None,
            "allowed_env_differences and allowed_mount_differences need a base role or compare_live = true",
        ),
        (
            sim_role(),
            {"placeholders": {"gpu": {"argv": ["hold"], "host": "nowhere"}}},
            "chain.placeholders.gpu.host names 'nowhere', which neither [hosts] nor [cluster] hosts declares",
        ),
        (
            sim_role(),
            {"placeholders": {"gpu": {"argv": ["hold"], "tmux_socket": "s"}}},
            "chain.placeholders.gpu: tmux_socket goes with a [hosts] host",
        ),
    ],
)
def test_containers_and_placeholders_on_hosts_are_declared_whole(
    make_plan: PlanFactory, role: dict[str, object], chain: dict[str, object] | None, expected: str
) -> None:
    with pytest.raises(PlanError) as exc:
        load_plan(make_plan(roles={"A": role, "B": sim_role()}, chain=chain))
    assert expected in one_line_error(exc)


def test_a_cluster_plan_locks_its_slurm_nodes_not_this_machine(make_plan: PlanFactory) -> None:
    from fairwin.plan.site import Site

    plan = make_plan()
    plan.write_text(plan.read_text() + '\n[cluster]\nscheduler = "slurm"\nnodes = ["n2", "n1"]\n')
    assert Site.of(load_plan(plan)).lock_keys == ["slurm://n1", "slurm://n2"]


def test_a_counted_cluster_plan_locks_the_job_that_holds_its_nodes(
    make_plan: PlanFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fairwin.plan.site import Site

    monkeypatch.setenv("SLURM_JOB_ID", "41")
    plan = make_plan()
    plan.write_text(plan.read_text() + '\n[cluster]\nscheduler = "slurm"\ncount = 2\nconstraint = "a100"\n')
    assert Site.of(load_plan(plan)).lock_keys == ["slurm-job://41"]


@pytest.mark.parametrize(
    ("cluster", "production", "expected"),
    [
        ('nodes = ["n1"]\ncount = 1\n', None, "name the nodes a window needs (nodes = [...]) or how many (count = N)"),
        ('constraint = "a100"\n', None, "name the nodes a window needs (nodes = [...]) or how many (count = N)"),
        (
            "count = 1\n",
            {"slurm_job": "prod", "base_url": "http://h:1", "model": "m"},
            "production.slurm_job: a window takes production's nodes from it; name them in [cluster] nodes",
        ),
    ],
)
def test_a_cluster_names_its_nodes_or_counts_them(
    make_plan: PlanFactory, cluster: str, production: dict[str, object] | None, expected: str
) -> None:
    plan = make_plan(production=production)
    plan.write_text(plan.read_text() + f'\n[cluster]\nscheduler = "slurm"\n{cluster}')
    with pytest.raises(PlanError) as exc:
        load_plan(plan)
    assert expected in one_line_error(exc)


@pytest.mark.parametrize(
    ("roles", "cluster", "production", "expected"),
    [
        ({}, 'nodes = ["n1"]\nhosts = ["a", "b"]\n', None, "hosts: 2 hosts for 1 node(s); one each"),
        ({}, 'nodes = ["n1", "n2"]\nhosts = ["a", "a"]\n', None, "each host is bound to a node of its own"),
        (
            {"B": sim_role(host="b", port=18997, container={"image": "localhost/x:1"})},
            'nodes = ["n1", "n2"]\nhosts = ["a", "b"]\n',
            None,
            "roles.B.host: a container does not run on a Slurm node's host yet",
        ),
        (
            {"P": sim_role(host="b", port=18998)},
            'nodes = ["n1", "n2"]\nhosts = ["a", "b"]\n',
            {"role": "P"},
            "production on a Slurm node runs as a Slurm job (slurm_job)",
        ),
    ],
)
def test_the_plans_hosts_on_a_cluster_are_bound_one_to_a_node(
    make_plan: PlanFactory,
    roles: dict[str, object],
    cluster: str,
    production: dict[str, object] | None,
    expected: str,
) -> None:
    plan = make_plan(roles={"A": sim_role(), "B": sim_role(), **roles}, production=production)
    plan.write_text(plan.read_text() + f'\n[cluster]\nscheduler = "slurm"\n{cluster}')
    with pytest.raises(PlanError) as exc:
        load_plan(plan)
    assert expected in one_line_error(exc)


def test_a_bound_host_is_not_also_an_ssh_host(make_plan: PlanFactory) -> None:
    plan = make_plan()
    cluster = '[cluster]\nscheduler = "slurm"\nnodes = ["n1", "n2"]\nhosts = ["a", "b"]\n'
    plan.write_text(plan.read_text() + f'\n[hosts.b]\naddress = "10.0.0.2"\n\n{cluster}')
    with pytest.raises(PlanError) as exc:
        load_plan(plan)
    assert "cluster.hosts: b is a [hosts] table too; a host is one or the other" in one_line_error(exc)


def test_a_placeholder_may_run_on_a_bound_host_but_not_in_tmux(make_plan: PlanFactory) -> None:
    cluster = '[cluster]\nscheduler = "slurm"\nnodes = ["n1", "n2"]\nhosts = ["a", "b"]\n'
    said = []
    for holder in ({"argv": ["hold"], "host": "b"}, {"argv": ["hold"], "host": "b", "tmux_socket": "s"}):
        plan = make_plan(chain={"placeholders": {"gpu": holder}})
        plan.write_text(plan.read_text() + f"\n{cluster}")
        try:
            said.append(str(load_plan(plan).plan.chain.placeholders["gpu"].host))
        except PlanError as exc:
            said.append(str(exc).split(": ", 1)[1])
    assert said == [
        "b",
        "(top level): chain.placeholders.gpu: tmux_socket goes with a [hosts] host (a placeholder here runs detached, "
        "and one on a Slurm node as a step, not in tmux); fix this value",
    ]
