"""The hardware's lock as one object: every lock taken all or none, let go together on every way out."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairwin.custody.hardware_lock import HardwareLock
from fairwin.custody.lock import HardwareHeld, MachineLocks, holder

KEYS = ["local://here", "ssh://10.0.0.2:22"]


def hardware(tmp_path: Path) -> HardwareLock:
    """The output directory's lock file, and two stores of shared locks (as this machine's and an archive's)."""
    stores = [MachineLocks(tmp_path / "machine"), MachineLocks(tmp_path / "shared")]
    return HardwareLock(tmp_path / "out" / ".window.lock", list(stores), KEYS)


def held_keys(lock: HardwareLock) -> list[list[str]]:
    return [sorted(p.stem for p in Path(store.location).glob("*.lock")) for store in lock.stores]


def test_every_lock_is_taken_and_let_go_together(tmp_path: Path) -> None:
    lock = hardware(tmp_path)
    record = lock.take("w1", tmp_path / "out" / "w1", "alice")
    assert record.window_id == "w1" and lock.record == record
    found = holder(lock.path)
    assert found is not None and found.record.window_id == "w1"
    assert held_keys(lock) == [["local_here", "ssh_10.0.0.2_22"]] * 2
    assert lock.release() == []
    assert holder(lock.path) is None and held_keys(lock) == [[], []] and lock.record is None


def test_a_second_holder_is_refused_and_takes_nothing(tmp_path: Path) -> None:
    first, second = hardware(tmp_path), hardware(tmp_path)
    first.take("w1", tmp_path / "out" / "w1", "alice")
    with pytest.raises(HardwareHeld, match="w1"):
        second.take("w2", tmp_path / "out" / "w2", "bob")
    found = holder(first.path)
    assert found is not None and found.record.window_id == "w1"  # the holder's locks untouched
    assert second.release("w2") == [] and held_keys(first) == [["local_here", "ssh_10.0.0.2_22"]] * 2


def test_a_shared_lock_held_elsewhere_leaves_no_lock_file_behind(tmp_path: Path) -> None:
    other = HardwareLock(tmp_path / "elsewhere" / ".window.lock", hardware(tmp_path).stores[1:], KEYS)
    other.take("w-other", tmp_path / "elsewhere" / "w-other", "carol")  # another output directory, same hardware
    lock = hardware(tmp_path)
    with pytest.raises(HardwareHeld, match="w-other"):
        lock.take("w1", tmp_path / "out" / "w1", "alice")
    assert holder(lock.path) is None and held_keys(lock)[0] == []  # nothing of w1's is left


def test_held_lets_everything_go_when_its_block_raises(tmp_path: Path) -> None:
    lock = hardware(tmp_path)
    with pytest.raises(RuntimeError, match="the stage failed"), lock.held("stage-1", tmp_path / "receipt", "alice"):
        assert holder(lock.path) is not None
        raise RuntimeError("the stage failed")
    assert holder(lock.path) is None and held_keys(lock) == [[], []]


class Unreachable(MachineLocks):
    """A shared store whose host went away while the window ran."""

    def release_hardware(self, window_id: str) -> None:
        raise ConnectionResetError("the host went away")


def test_the_lock_file_goes_even_when_a_shared_store_cannot_be_reached(tmp_path: Path) -> None:
    lock = HardwareLock(tmp_path / "out" / ".window.lock", [Unreachable(tmp_path / "shared")], KEYS)
    lock.take("w1", tmp_path / "out" / "w1", "alice")
    with pytest.raises(ConnectionResetError):
        lock.release()
    assert holder(lock.path) is None and lock.record is None
