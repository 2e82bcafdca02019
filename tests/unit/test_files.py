from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable
from pathlib import Path

import pytest

from fairwin.errors import CorruptRecordError, InputError
from fairwin.files import append_jsonl, canonical_json, read_jsonl, sha256_bytes, write_json_atomic
from fairwin.gates.correctness import GateRunRecord
from fairwin.gates.receipt import read_receipt, write_receipt
from tests.damage import DAMAGE, drop_the_seal


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "doc.json"
    write_json_atomic(target, {"b": 1, "a": [1, 2]})
    write_json_atomic(target, {"b": 2})
    assert json.loads(target.read_text()) == {"b": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["doc.json"]


def test_atomic_write_failure_keeps_old_file_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "doc.json"
    write_json_atomic(target, {"ok": True})

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")  # after the temp file was created and written

    monkeypatch.setattr("fairwin.files.os.fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output error"):
        write_json_atomic(target, {"ok": False})
    assert json.loads(target.read_text()) == {"ok": True}
    assert [p.name for p in tmp_path.iterdir()] == ["doc.json"]  # the temp file was removed


def _append_many(path: str, writer: int) -> None:
    for i in range(200):
        append_jsonl(Path(path), [{"writer": writer, "i": i, "pad": "x" * 500}])


def test_concurrent_appends_keep_every_line_whole(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    procs = [multiprocessing.Process(target=_append_many, args=(str(path), w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    rows = read_jsonl(path)
    assert len(rows) == 800
    for writer in range(4):
        assert [r["i"] for r in rows if r["writer"] == writer] == list(range(200))


def test_torn_last_line_is_reported_not_dropped(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    append_jsonl(path, [{"a": 1}])
    with path.open("a") as handle:
        handle.write('{"a": 2')
    with pytest.raises(CorruptRecordError, match=r"log.jsonl:2: torn line"):
        read_jsonl(path)


def test_canonical_json_is_order_independent() -> None:
    assert canonical_json({"b": 1, "a": 2}) == canonical_json({"a": 2, "b": 1}) == '{"a":2,"b":1}'
    assert sha256_bytes(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


@pytest.mark.parametrize("damage", [*DAMAGE, drop_the_seal], ids=lambda d: d.__name__)
def test_a_damaged_receipt_is_a_corrupt_record(tmp_path: Path, damage: Callable[[Path], None]) -> None:
    path = tmp_path / "receipt.json"
    passed = GateRunRecord(
        name="rng",
        verdict="PASS",
        command=["true"],
        exit_status=0,
        commit="0" * 40,
        dirty=False,
        started_unix=0.0,
        duration_s=0.1,
        log="rng.log",
        output_tail="",
        artifacts={},
    )
    write_receipt(path, passed)
    assert read_receipt(path, GateRunRecord).verdict == "PASS"
    damage(path)
    with pytest.raises(CorruptRecordError, match=r"receipt\.json"):
        read_receipt(path, GateRunRecord)


def test_a_missing_receipt_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such receipt"):
        read_receipt(tmp_path / "absent.json", GateRunRecord)
