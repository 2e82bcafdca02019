"""A container role's run line and the environment it should have, exactly."""

from __future__ import annotations

from pathlib import Path

from fairwin.launch.container import expected_env, run_args
from fairwin.launch.inspect import image_env
from fairwin.launch.spec import make_spec
from fairwin.plan.roles import Role


def test_the_run_line_names_labels_and_gives_the_container_exactly_its_declared_variables() -> None:
    role = Role.model_validate(
        {
            "argv": ["vllm", "serve", "/models/m", "--port", "{port}"],
            "base_url": "http://127.0.0.1:{port}",
            "port": 8000,
            "served_model": "m",
            "env": {"B": "2", "A": "1"},
            "container": {
                "image": "vllm/vllm-openai:v1",
                "mounts": ["/srv/models:/models:ro"],
                "gpus": "all",
                "devices": ["/dev/nvidia0"],
                "run_args": ["--ipc=host"],
            },
        }
    )
    spec = make_spec("B", {"B": role}, Path("/plans")).for_start("W1", "s2")
    assert spec.env == {"A": "1", "B": "2"}  # nothing of fairwin's own environment
    assert run_args(spec) == [
        "run",
        "-d",
        "--name",
        "fairwin-W1-s2-B-head",
        "--network",
        "host",
        "--label=fairwin.member=head",
        "--label=fairwin.role=B",
        "--label=fairwin.start=s2",
        "--label=fairwin.window=W1",
        "--init",
        "--env=A=1",
        "--env=B=2",
        "--volume=/srv/models:/models:ro",
        "--device=/dev/nvidia0",
        "--gpus=all",
        "--ipc=host",
        "vllm/vllm-openai:v1",
        "vllm",
        "serve",
        "/models/m",
        "--port",
        "8000",
    ]


def test_the_expected_environment_is_the_images_then_the_declared_then_what_the_runtime_sets_itself() -> None:
    image = image_env('[{"Config": {"Env": ["PATH=/opt/bin:/usr/bin", "LANG=C.UTF-8"]}}]')
    running = {"PATH": "/opt/bin:/usr/bin", "LANG": "C.UTF-8", "A": "1", "HOSTNAME": "gpu1", "container": "podman"}
    assert expected_env({"A": "1"}, image, running) == running  # the runtime's own HOSTNAME and container accepted
    assert expected_env({"A": "1"}, image, {**running, "X": "smuggled"}) == running  # X is not expected
    assert image_env("not json") == {}
