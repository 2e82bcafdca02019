"""Overrides at run time: `--set KEY=VALUE` and `{env:NAME}` in pins, applied before validation and recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairwin.errors import PlanError
from fairwin.gates.binding import bind, moved, rehearsal_parts
from fairwin.plan import load_plan
from fairwin.plan.overrides import Override, apply_overrides, parse_override, resolve_pin_variables
from tests.conftest import PlanFactory, sim_role

SHA = "ab" * 32


def test_a_key_is_read_as_toml_reads_it_and_a_value_is_toml_or_the_text_itself() -> None:
    assert parse_override("roles.B.repo.commit=3f2a9c1") == Override(
        key="roles.B.repo.commit", path=("roles", "B", "repo", "commit"), value="3f2a9c1"
    )
    assert parse_override('roles.B.identity."/opt/v.py"=' + SHA).path == ("roles", "B", "identity", "/opt/v.py")
    assert parse_override("window.repeats=4").value == 4
    assert parse_override("window.rule = 'win2-v1'").value == "win2-v1"
    assert parse_override('roles.A.argv=["a", "b"]').value == ["a", "b"]
    assert parse_override("roles.A.workers.0.repo.commit=1234567").path[3] == "0"
    # A pin is text, whatever TOML would make of it: a short sha of digits, or one that reads as 3 x 10^45678.
    assert [parse_override(f"production.commit={sha}").value for sha in ("1234567", "3e45678")] == [
        "1234567",
        "3e45678",
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("roles.B.repo.commit", "write KEY=VALUE"),
        ("=3f2a9c1", "write KEY=VALUE"),
        ("roles.B.identity./opt/v.py=x", "is not a dotted key; quote a part holding dots or slashes"),
    ],
)
def test_a_malformed_override_is_one_line_saying_how_to_write_it(text: str, says: str) -> None:
    with pytest.raises(PlanError, match=says):
        parse_override(text)


def test_overrides_apply_in_order_into_tables_and_list_items() -> None:
    data = {"window": {"repeats": 3}, "roles": {"A": {"workers": [{"argv": ["w"]}]}}}
    changes = ["window.repeats=4", "window.repeats=5", "roles.A.workers.0.repo.commit=1234567", "production.commit=x"]
    apply_overrides(data, [parse_override(text) for text in changes])
    assert data == {
        "window": {"repeats": 5},
        "roles": {"A": {"workers": [{"argv": ["w"], "repo": {"commit": "1234567"}}]}},
        "production": {"commit": "x"},
    }
    with pytest.raises(PlanError, match=r"--set roles.A.workers.1.repo: roles.A.workers.1 is not an item of a list"):
        apply_overrides(data, [parse_override("roles.A.workers.1.repo={}")])
    with pytest.raises(PlanError, match=r"--set window.repeats.x: window.repeats is a value, not a table"):
        apply_overrides(data, [parse_override("window.repeats.x=1")])


def test_only_pin_fields_read_variables_and_an_unset_one_is_refused_by_name() -> None:
    data = {
        "roles": {
            "B": {
                "argv": ["serve", "{env:TOKEN}"],  # not a pin: resolved at launch, recorded as written
                "repo": {"path": "/srv/b", "commit": "{env:H}", "artifacts": {"/opt/v.py": "{env:Q}:build/v.py"}},
                "identity": {"/opt/w.py": "{env:W_SHA}"},
                "workers": [{"argv": ["w"], "repo": {"path": "/srv/w", "commit": "{env:Q}"}}],
            }
        },
        "production": {"commit": "prod-{env:BUILD}"},
        "window": {"expected_commit": "{env:H}"},
    }
    environ = {"H": "1111111", "Q": "2222222", "W_SHA": SHA, "BUILD": "77", "TOKEN": "secret"}
    read = resolve_pin_variables(data, environ)
    role = data["roles"]["B"]
    assert role["argv"] == ["serve", "{env:TOKEN}"]
    assert role["repo"] == {"path": "/srv/b", "commit": "1111111", "artifacts": {"/opt/v.py": "2222222:build/v.py"}}
    assert role["identity"] == {"/opt/w.py": SHA} and role["workers"][0]["repo"]["commit"] == "2222222"
    assert data["production"] == {"commit": "prod-77"} and data["window"] == {"expected_commit": "1111111"}
    # Each pin read is the override a window records: its key parses back to its path (parse_window_plan).
    assert all(Override.recorded(o.key, o.value).path == o.path for o in read)
    assert {o.key: o.value for o in read}["roles.B.repo.commit"] == "1111111"
    assert {o.key: o.variable for o in read} == {
        'roles.B.identity."/opt/w.py"': "W_SHA",
        "roles.B.repo.commit": "H",
        'roles.B.repo.artifacts."/opt/v.py"': "Q",
        "roles.B.workers.0.repo.commit": "Q",
        "production.commit": "BUILD",
        "window.expected_commit": "H",
    }
    with pytest.raises(PlanError, match=r"^production.commit = 'x-\{env:NOPE\}': NOPE is not set \(or empty\); export"):
        resolve_pin_variables({"production": {"commit": "x-{env:NOPE}"}}, {"NOPE": ""})


def test_the_effective_plan_is_validated_recorded_and_digested(
    make_plan: PlanFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pinned = tmp_path / "verifier.py"
    plan = make_plan()
    plan_text = plan.read_text()
    as_written = load_plan(plan)
    assert as_written.sha256 == as_written.file_sha256 and as_written.overrides == ()
    key = f'roles.B.identity."{pinned}"'
    monkeypatch.setenv("W_SHA", SHA)
    changed = load_plan(plan, ["window.repeats=2", f"{key}={{env:W_SHA}}"])
    assert changed.plan.window.repeats == 2 and changed.plan.roles["B"].identity == {str(pinned): SHA}
    assert changed.file_sha256 == as_written.sha256 != changed.sha256
    assert [(c.key, c.value, c.variable) for c in changed.overrides] == [
        ("window.repeats", 2, None),
        (key, "{env:W_SHA}", None),  # as set: the pin's value read from the variable follows it
        (key, SHA, "W_SHA"),
    ]
    assert load_plan(plan, ["window.repeats=2", f"{key}={SHA}"]).sha256 != changed.sha256  # another history
    assert plan.read_text() == plan_text  # the file is never written
    with pytest.raises(PlanError, match=r"window.repeats: Input should be a valid integer.*\(got 'many'\)"):
        load_plan(plan, ["window.repeats=many"])
    with pytest.raises(
        PlanError, match=r"roles.B.nonsense: 'nonsense' is not a key here; remove it or fix its spelling"
    ):
        load_plan(plan, ["roles.B.nonsense=1"])


def test_a_rehearsal_binds_what_it_vouches_for_and_names_what_moved(make_plan: PlanFactory) -> None:
    roles = {"A": sim_role(port=8123), "B": sim_role("--spec-tokens", "2", identity={"/opt/w.py": SHA})}
    plan = make_plan(roles=roles, production={"role": "A", "commit": "aaaaaaa"})
    bound = bind(rehearsal_parts(load_plan(plan)))
    assert "production.commit" in bound and "roles.A.argv" in bound and not any(k.startswith("roles.B") for k in bound)
    pin_moved = load_plan(plan, [f'roles.B.identity."/opt/w.py"={"cd" * 32}', "window.repeats=2"])
    assert moved(bound, bind(rehearsal_parts(pin_moved))) == []
    production_moved = load_plan(plan, ["production.commit=bbbbbbb", "roles.A.env.X='1'"])
    # An empty table is a field of its own: it went (roles.A.env) as its first key came (roles.A.env.X).
    changed = ["production.commit", "roles.A.env", "roles.A.env.X"]
    assert moved(bound, bind(rehearsal_parts(production_moved))) == changed
