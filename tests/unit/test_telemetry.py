"""GPU telemetry, exactly: nvidia-smi's CSV, the reasons bitmask, the cap a start ran at, its dial-backs.

The CSV lines are in nvidia-smi's `--format=csv,noheader,nounits` shape for fairwin's fields, written here
from NVIDIA's documented field semantics (no GPU was at hand to record them from): a locked H200 under
load, the same dialled back for heat and then for its power cap, an idle GPU, and a field the device
does not support ('[N/A]')."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairwin.directory.journal import JournalRow
from fairwin.errors import InputError
from fairwin.plan.site import Site
from fairwin.telemetry.gpu import ComputeProcess, GpuSample, parse_compute_apps, parse_query
from fairwin.telemetry.hold_clocks import between_starts, held, relocks
from fairwin.telemetry.sampler import Dialback, Sampler, events_by_repeat, summarize
from tests.conftest import PlanFactory

LOCKED = "0, GPU-a, NVIDIA H200, 1755, 1980, 1755, 0x0000000000000002, 61, 655.10, 700.00"
HOT = "0, GPU-a, NVIDIA H200, 1425, 1980, 1755, 0x0000000000000022, 88, 640.00, 700.00"
POWER = "0, GPU-a, NVIDIA H200, 1605, 1980, 1755, 0x0000000000000006, 70, 699.80, 700.00"
IDLE = "0, GPU-a, NVIDIA H200, 345, 1980, 1755, 0x0000000000000001, 31, 75.20, 700.00"
OTHER_GPU = "1, GPU-b, NVIDIA H200, 1755, 1980, 1755, 0x0000000000000002, 59, [N/A], 700.00"


def test_a_line_is_parsed_field_by_field_and_unsupported_values_are_none() -> None:
    (locked, other) = parse_query(f"{LOCKED}\n{OTHER_GPU}\n", when=10.0)
    assert (locked.gpu, locked.uuid, locked.sm_mhz, locked.max_sm_mhz, locked.applications_mhz) == (
        0,
        "GPU-a",
        1755.0,
        1980.0,
        1755.0,
    )
    assert locked.reasons == 0x2 and locked.reason_names == ["applications_clocks_setting"] and locked.dialback is None
    assert other.power_w is None and other.power_limit_w == 700.0
    (hot,) = parse_query(HOT, when=11.0)
    assert hot.dialback == "thermal" and hot.reason_names == ["applications_clocks_setting", "sw_thermal_slowdown"]
    assert parse_query(POWER, when=12.0)[0].dialback == "power"


def test_a_line_of_the_wrong_shape_is_one_clear_error() -> None:
    with pytest.raises(InputError, match="nvidia-smi line 1 has 3 fields, not 10"):
        parse_query("0, GPU-a, 1755\n", when=0.0)


def test_compute_processes() -> None:
    apps = parse_compute_apps("GPU-a, 4242, python3, 40960\nGPU-b, 4243, vllm, [N/A]\n")
    assert [p.model_dump(exclude={"host"}) for p in apps] == [
        {"gpu_uuid": "GPU-a", "pid": 4242, "name": "python3", "used_mib": 40960.0},
        {"gpu_uuid": "GPU-b", "pid": 4243, "name": "vllm", "used_mib": None},
    ]


class Replay:
    name = "replay"

    def sample(self) -> list[GpuSample]:
        raise AssertionError("not sampled in these tests")

    def compute_processes(self) -> list[ComputeProcess]:
        return []


def sampler_of(*lines: str) -> Sampler:
    sampler = Sampler(Replay(), Path("/dev/null"), 1.0)
    for when, line in enumerate(lines):
        sampler.samples += parse_query(line, when=100.0 + when)
    return sampler


def test_the_cap_is_the_locked_clock_under_load_and_each_dialback_is_counted_once() -> None:
    seen = summarize(sampler_of(IDLE, LOCKED, HOT, HOT, LOCKED, POWER, LOCKED), cap_from="locked")
    assert seen.cap_mhz == 1755.0 and seen.cap_by_gpu == {"GPU-a": 1755.0}
    assert seen.sm_mhz == {"min": 1425.0, "median": 1680.0, "max": 1755.0}  # the idle sample is left out
    assert [(d.time, d.kind) for d in seen.dialbacks] == [(102.0, "thermal"), (105.0, "power")]


def test_gpus_that_disagree_leave_the_start_without_a_cap() -> None:
    faster = OTHER_GPU.replace("1, GPU-b, NVIDIA H200, 1755", "1, GPU-b, NVIDIA H200, 1980")
    seen = summarize(sampler_of(LOCKED, faster), cap_from="locked")
    assert seen.cap_mhz is None and seen.cap_by_gpu == {"GPU-a": 1755.0, "GPU-b": 1980.0}
    assert seen.problems == ["the GPUs disagree on the cap: {'GPU-a': 1755.0, 'GPU-b': 1980.0}; the start has none"]


def test_an_unlocked_gpu_has_no_locked_cap_but_its_applications_clock_can_be_read() -> None:
    boosting = LOCKED.replace("0x0000000000000002", "0x0000000000000000")
    assert summarize(sampler_of(boosting), cap_from="locked").cap_mhz is None
    assert summarize(sampler_of(boosting), cap_from="applications").cap_mhz == 1755.0


def test_the_cap_from_the_servers_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("INFO starting\nINFO clock cap 1620 MHz on 8 GPUs\n")
    seen = summarize(sampler_of(LOCKED), cap_from="log", logs={"here": log}, pattern=r"clock cap (\d+) MHz")
    assert seen.cap_mhz == 1620.0
    missing = summarize(sampler_of(LOCKED), cap_from="log", logs={"here": log}, pattern=r"locked at (\d+)")
    assert missing.cap_mhz is None and "no line matching" in missing.problems[0]


def test_dialbacks_count_in_the_wave_they_fell_in_or_the_next() -> None:
    waves = [("c", 1, 10.0, 2.0), ("c", 2, 13.0, 2.0), ("d", 1, 16.0, 2.0)]
    events = [Dialback(time=t, gpu=0, kind="thermal", reasons=[]) for t in (11.0, 12.5, 20.0)]
    assert events_by_repeat(events, waves) == {("c", 1): 1, ("c", 2): 1, ("d", 1): 1}


def test_productions_cap_comes_from_its_environment_file(make_plan: PlanFactory) -> None:
    from fairwin.plan import load_plan
    from fairwin.telemetry.cap import production_cap

    plan = make_plan(window={"production_clock_cap_mhz": 1500})
    assert production_cap(Site.of(load_plan(plan))) == (1500.0, "window.production_clock_cap_mhz")
    plan.write_text(plan.read_text() + '\n[telemetry]\nproduction_cap_file = "gpu.env"\n')
    assert production_cap(Site.of(load_plan(plan)))[0] == 1500.0  # no file: the plan's own, and the reason says so
    env = plan.parent / "gpu.env"
    env.write_text('GPU_CLOCK_CAP="1755"\n')
    assert production_cap(Site.of(load_plan(plan))) == (1755.0, f"{env}: GPU_CLOCK_CAP")
    env.write_text("GPU_CLOCK_CAP=fast\n")
    with pytest.raises(InputError, match="GPU_CLOCK_CAP='fast' is not a number of MHz"):
        production_cap(Site.of(load_plan(plan)))


def test_caps_from_logs_need_no_gpu_source_and_every_hosts_log_is_read(tmp_path: Path) -> None:
    """Without NVML or nvidia-smi: each host's log gives its cap; a host at another cap leaves the start none,
    and a log that prints a second cap is a change of cap inside the start."""
    here, h1 = tmp_path / "server.log", tmp_path / "h1.log"
    here.write_text("clock cap 2300 MHz\nserving\n")
    h1.write_text("clock cap 2150 MHz\n")
    seen = summarize(None, cap_from="log", logs={"here": here, "h1": h1}, pattern=r"clock cap (\d+) MHz")
    assert (seen.source, seen.samples, seen.cap_mhz) == ("none", 0, None)
    assert seen.cap_by_host == {"h1": 2150.0, "here": 2300.0}
    assert seen.problems == ["the hosts disagree on the cap: {'h1': 2150.0, 'here': 2300.0}; the start has none"]
    h1.write_text("clock cap 2300 MHz\nwatchdog: clock cap 2150 MHz\n")
    moved = summarize(None, cap_from="log", logs={"here": here, "h1": h1}, pattern=r"clock cap (\d+) MHz")
    assert moved.cap_by_host == {"h1": None, "here": 2300.0} and moved.cap_mhz is None
    assert [(c.host, c.before_mhz, c.after_mhz) for c in moved.cap_changes] == [("h1", 2300.0, 2150.0)]
    assert "the cap changed inside the start on host h1 (its log): 2300 -> 2150 MHz" in moved.problems


def test_a_watchdog_that_relocks_a_lower_clock_mid_start_is_a_change_of_cap_not_the_highest_lock() -> None:
    relocked = LOCKED.replace("1755, 1980, 1755", "1605, 1980, 1755")
    seen = summarize(sampler_of(LOCKED, LOCKED, relocked, relocked), cap_from="locked", host="h1")
    assert seen.cap_mhz is None and seen.cap_by_gpu == {"GPU-a": None} and seen.cap_by_host == {"h1": None}
    (change,) = seen.cap_changes
    assert (change.host, change.gpu, change.before_mhz, change.after_mhz, change.time) == (
        "h1",
        "GPU-a",
        1755.0,
        1605.0,
        102.0,
    )
    assert "the cap changed inside the start on GPU GPU-a: 1755 -> 1605 MHz" in seen.problems


def test_between_starts_dialbacks_are_counted_by_gap_within_the_hold_only() -> None:
    journal = [
        JournalRow.model_validate(row)
        for row in (
            {"step": "open", "event": "end", "time": 0.0},
            {"step": "production down", "event": "end", "time": 10.0},
            {"step": "start s1", "event": "begin", "time": 11.0},
            {"step": "restore", "event": "begin", "time": 60.0},
        )
    ]
    spans = [("s1", 20.0, 30.0), ("s2", 40.0, 50.0)]  # each start's own sampling
    hot, cool = 0x1 | 0x20, 0x1  # idle and slowed for heat, idle
    # Each gap is judged on its own samples: the GPU still hot at 35 counts again (s1 sampled it between), and
    # cooling at 35.5 then hot at 36 is a second dial-back; a power slowdown is not an invalidating kind here.
    timeline = [(5.0, hot), (15.0, hot), (25.0, hot), (35.0, hot), (35.5, cool), (36.0, hot), (55.0, hot), (65.0, hot)]
    power = _held_at(56.0, 1980, 0x1 | 0x80, uuid="GPU-b")
    samples = [*(_held_at(when, 1980, reasons) for when, reasons in timeline), power]
    assert held(journal) == (10.0, 60.0)
    assert between_starts(samples, held(journal), spans, ["thermal"]) == {"before s1": 1, "before s2": 2, "after s2": 1}
    assert between_starts(samples, held(journal), spans, ["power"]) == {"after s2": 1}
    # Without production the window holds its hardware from its open to its decision: its gaps are watched too.
    alone = [journal[0], journal[2], JournalRow.model_validate({"step": "decide", "event": "begin", "time": 60.0})]
    assert held(alone) == (0.0, 60.0)
    assert between_starts(samples, held(alone), spans, ["thermal"]) == {"before s1": 1, "before s2": 2, "after s2": 1}
    two_gpus = [*samples, _held_at(15.0, 1980, hot, uuid="GPU-b")]  # each GPU's own dial-back
    assert between_starts(two_gpus, held(journal), spans, ["thermal"])["before s1"] == 2
    # A window killed before its open ended held nothing yet: no hold, and no gap's samples are judged.
    unopened = [JournalRow.model_validate({"step": "open", "event": "begin", "time": 0.0}), journal[2]]
    assert held(unopened) is None
    assert between_starts(samples, held(unopened), spans, ["thermal", "power"]) == {}


def _held_at(when: float, mhz: float, reasons: int, uuid: str = "GPU-a") -> GpuSample:
    return GpuSample(
        time=when,
        gpu=0,
        uuid=uuid,
        name="NVIDIA H200",
        sm_mhz=mhz,
        max_sm_mhz=1980,
        applications_mhz=1980,
        reasons=reasons,
        temperature_c=40,
        power_w=80,
        power_limit_w=700,
    )


def test_a_relock_between_starts_is_named_by_its_gap_with_the_caps_around_it() -> None:
    spans = [("s1", 20.0, 30.0), ("s2", 40.0, 50.0), ("s3", 60.0, 70.0)]
    caps = {"s1": {"GPU-a": 1980.0}, "s2": {"GPU-a": 1980.0}, "s3": {"GPU-a": 1980.0}}
    samples = [
        _held_at(15.0, 1980, 0x1 | 0x2),  # idle, held at s1's cap: no change
        _held_at(33.0, 1755, 0x1 | 0x2),  # re-locked while idle, and back before s2
        _held_at(36.0, 1980, 0x1 | 0x2),
        _held_at(55.0, 345, 0x1),  # idle with no lock: says nothing of the cap
        _held_at(56.0, 1600, 0x2 | 0x20),  # dialled back for heat: a dial-back, not a cap
        _held_at(75.0, 1755, 0x2),  # after the last start
        _held_at(99.0, 1500, 0x2),  # after the hold
    ]
    found = relocks(samples, (10.0, 90.0), spans, caps, "locked")
    assert found == {"before s2": ["GPU-a 1980 -> 1755 -> 1980 MHz"], "after s3": ["GPU-a 1980 -> 1755 MHz"]}
    # Caps from the servers' logs (each start's by GPU is its host's logged cap): the GPUs still show the re-lock.
    assert relocks(samples, (10.0, 90.0), spans, caps, "log") == found
    assert relocks(samples, (10.0, 90.0), spans, caps, "none") == {}  # no cap read at all: nothing to hold to
    assert relocks(samples, None, spans, caps, "locked") == {}  # no hold: nothing between starts


def test_a_one_host_starts_cap_matches_the_holds_sample_of_its_host_by_uuid() -> None:
    remote = _held_at(35.0, 1980, 0x1 | 0x2).model_copy(update={"host": "h1"})
    spans = [("s1", 20.0, 30.0), ("s2", 40.0, 50.0)]
    caps = {"s1": {"GPU-a": 1980.0}, "s2": {"GPU-a": 1755.0}}  # s2 at another cap: a condition of its own
    assert relocks([remote], (10.0, 90.0), spans, caps, "locked") == {"before s2": ["h1/GPU-a 1980 -> 1755 MHz"]}
