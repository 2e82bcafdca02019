from __future__ import annotations

import pytest

from fairwin.errors import GateRefused
from fairwin.gates.budget import Calibration, cell_key, check_budget, estimate, role_key
from fairwin.plan import load_plan, resolve_mode
from tests.conftest import PlanFactory


def test_assumed_estimate_by_hand(make_plan: PlanFactory) -> None:
    # conftest budget: start 1 s, stop 1 s, 2 ms/token decode, 0.5 ms/token prefill (default);
    # cell: 2 families x 3 repeats = 6 waves of 2 streams of (64 prompt + 48 decode) tokens; warm-up: one
    # 16-token stream and at most 4 uncounted waves of that cell.
    loaded = load_plan(make_plan())
    found = estimate(loaded, "controlled", resolve_mode(loaded, "controlled"))
    stream = (64 * 0.5 + 48 * 2) / 1000
    warmup = (64 * 0.5 + 16 * 2) / 1000 + 4 * 2 * stream
    per_start = 1 + warmup + 6 * 2 * stream + 1
    assert [c.start for c in found.starts] == ["s1", "s2", "s3"]
    assert found.measurement_end_s == pytest.approx(3 * per_start)
    assert found.reserve_total_s == pytest.approx(3 * per_start + 333)
    assert found.dry_bound_s == pytest.approx(3 * per_start + 600)
    assert found.sources["role A start"] == "assumed: 1 s"


def test_measured_costs_replace_assumed_ones(make_plan: PlanFactory) -> None:
    loaded = load_plan(make_plan())
    plan = loaded.plan
    calibration = Calibration(
        startup_s={role_key(plan.roles["A"]): [10.0, 30.0, 20.0]},
        stop_s={role_key(plan.roles["A"]): [2.0]},
        wave_s={cell_key(plan.cells["short-b1"]): [4.0, 5.0, 6.0]},
    )
    found = estimate(loaded, "controlled", resolve_mode(loaded, "controlled"), calibration)
    s1 = found.starts[0]
    assert (s1.startup_s, s1.stop_s, s1.waves_s) == (20.0, 2.0, 6 * 5.0)
    assert found.starts[1].startup_s == 1.0  # role B has no history: assumed
    assert found.sources["role A start"] == "measured: median 20.0 s over 3 starts"
    assert found.sources["cell short-b1"] == "measured: median wave 5.0 s over 3 waves"


def test_refusals_name_what_would_fit(make_plan: PlanFactory) -> None:
    path = make_plan()
    path.write_text(path.read_text().replace("decode_ms_per_token = 2", "decode_ms_per_token = 2\nlimit_min = 10.1"))
    loaded = load_plan(path)
    found = estimate(loaded, "controlled", resolve_mode(loaded, "controlled"))
    with pytest.raises(GateRefused, match=r"dry bound is 10\.\d min, over the 10.1 min limit; it fits while the pair"):
        check_budget(loaded, found)
    path.write_text(path.read_text().replace("limit_min = 10.1", "measurement_limit_min = 0.01"))
    loaded = load_plan(path)
    with pytest.raises(GateRefused, match=r"past its 0\.01 min limit"):
        check_budget(loaded, estimate(loaded, "controlled", resolve_mode(loaded, "controlled")))
