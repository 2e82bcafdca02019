"""One suite, both backends: the JSONL file and a real PostgreSQL server answer every archive question alike."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from fairwin.archive import ArchivedRepeat, ArchiveRow, ArchiveStore, noise, open_archive, select
from fairwin.archive.postgres import SCHEMA_VERSION, PostgresArchive
from fairwin.errors import ArchiveError, InputError
from tests.integration.helpers import fairwin
from tests.integration.postgres import Server


def control(window: str, start: str, base: float, **keys: Any) -> ArchiveRow:
    fields: dict[str, Any] = {
        "window_id": window,
        "time": 1_700_000_000.0 + base,
        "commit": "c0ffee",
        "mode": "controlled",
        "role": "A",
        "start": start,
        "cell": "short",
        "max_tokens": 32,
        "clock_cap_mhz": 1980.0,
        "production_commit": "p1",
        "prompt_tokens": 64,
        "concurrency": 1,
        "temperature": 0.0,
        "hosts": ["gpu-a", "gpu-b"],
        "gpu_model": "NVIDIA H200",
        "gpu_count": 2,
        "clock_caps_mhz": {"gpu-a": 1980.0, "gpu-b": None},
    }
    repeats = [
        ArchivedRepeat(
            repeat=i,
            pooled_rate_tps=base * (1 + i / 300),
            accepted_per_round=2.5 + i / 7,
            decode_tps=None,
            ms_per_round=11.0 / 3,
            ttft_s=0.1 + i / 1000,
        )
        for i in (1, 2, 3)
    ]
    return ArchiveRow(**{**fields, **keys, "repeats": repeats})


@pytest.fixture(params=["jsonl", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ArchiveStore]:
    if request.param == "jsonl":
        yield open_archive(tmp_path / "archive.jsonl")
        return
    url = request.getfixturevalue("postgres_url")
    database = open_archive(url)
    assert isinstance(database, PostgresArchive)
    database.migrate()
    yield database


def test_every_field_comes_back_as_it_was_appended(store: ArchiveStore) -> None:
    rows = [control("w1", "s1", 100.0), control("w1", "s3", 101.5, clock_caps_mhz={}, gpu_model=None, hosts=None)]
    assert store.append(rows).added == 2
    snapshot = store.snapshot()
    assert [r.model_dump() for r in snapshot.rows] == [r.model_dump() for r in rows]  # floats bit for bit
    assert snapshot.problems == ()


def test_a_retried_append_adds_nothing_and_a_new_row_beside_old_ones_is_added(store: ArchiveStore) -> None:
    first = [control("w1", "s1", 100.0), control("w1", "s3", 101.0)]
    store.append(first)
    again = store.append([*first, control("w1", "s5", 102.0)])
    assert (again.added, again.already) == (1, 2)
    assert [r.start for r in store.snapshot().rows] == ["s1", "s3", "s5"]


def test_both_backends_give_the_same_snapshot_and_the_same_noise(tmp_path: Path, postgres_url: str) -> None:
    rows = [
        control(f"w{i}", s, 100.0 + 7 * i + (s == "s3"), role=("A", "P")[i % 2]) for i in range(6) for s in ("s1", "s3")
    ]
    stores = [open_archive(tmp_path / "a.jsonl"), open_archive(postgres_url)]
    assert isinstance(stores[1], PostgresArchive)
    stores[1].migrate()
    for store in stores:
        for i in range(6):  # windows appended in a different order on each
            store.append([r for r in rows if r.window_id == f"w{(i * 5 if store is stores[1] else i) % 6}"])
    file, database = (s.snapshot() for s in stores)
    assert file.digest == database.digest and file.count == database.count == 12
    key = rows[0].key().__dict__
    assert len(select(file.rows, key)) == 6  # role A only: P's controls are another noise
    assert noise(select(file.rows, key), "short", "pooled_rate_tps") == noise(
        select(database.rows, key), "short", "pooled_rate_tps"
    )


def test_a_window_is_appended_whole_or_not_at_all(postgres_url: str) -> None:
    store = open_archive(postgres_url)
    assert isinstance(store, PostgresArchive)
    store.migrate()
    with psycopg.connect(postgres_url, autocommit=True) as admin:  # the third repeat of s3 is refused by the server
        admin.execute("""CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN
                         IF NEW.start = 's3' AND NEW.repeat = 3 THEN RAISE EXCEPTION 'disk full'; END IF;
                         RETURN NEW; END $$ LANGUAGE plpgsql""")
        admin.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON fairwin_control_repeats FOR EACH ROW EXECUTE FUNCTION refuse()"
        )
    with pytest.raises(ArchiveError, match="disk full"):
        store.append([control("w1", "s1", 100.0), control("w1", "s3", 101.0)])
    assert store.snapshot().count == 0  # s1 went in first, and went with the rest


def test_schema_versions_are_applied_once_and_a_newer_one_is_refused(postgres_url: str, tmp_path: Path) -> None:
    store = open_archive(postgres_url)
    assert isinstance(store, PostgresArchive)
    no_schema = f"has no fairwin schema, this fairwin needs v{SCHEMA_VERSION}; run `fairwin archive migrate"
    with pytest.raises(ArchiveError, match=no_schema):
        store.snapshot()
    # Two migrators at once: the advisory lock lets one apply, the other finds the schema current.
    script = f"from fairwin.archive import open_archive; print(len(open_archive({postgres_url!r}).migrate()))"
    both = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    assert sorted(int(p.communicate(timeout=60)[0]) for p in both) == [0, SCHEMA_VERSION]
    shown = fairwin("archive", "migrate", "--archive", postgres_url)
    assert shown.returncode == 0 and f"schema v{SCHEMA_VERSION} (already current)" in shown.stdout
    assert "***" in shown.stdout and postgres_url.split(":")[2].split("@")[0] not in shown.stdout  # no password
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("INSERT INTO fairwin_archive_schema (version, description) VALUES (99, 'from the future')")
    with pytest.raises(ArchiveError, match="schema v99, newer than this fairwin's"):
        store.append([control("w1", "s1", 100.0)])


def test_a_wrong_password_is_one_line_without_the_password(postgres_server: Server) -> None:
    url = postgres_server.url().replace(postgres_server.password, "not-the-password-1234")
    done = fairwin("archive", "stats", "--archive", url)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "cannot be reached" in done.stderr and "not-the-password-1234" not in done.stderr


def test_import_and_export_keep_every_field_and_a_second_import_adds_nothing(tmp_path: Path, postgres_url: str) -> None:
    source = tmp_path / "team.jsonl"
    older = {
        "format": "fairwin.archive/1",
        "window_id": "w0",
        "time": 1.0,
        "commit": None,
        "mode": "controlled",
        "role": "A",
        "start": "s1",
        "cell": "short",
        "max_tokens": 32,
        "clock_cap_mhz": None,
        "repeats": [{"repeat": 1, "pooled_rate_tps": 99.5}],
    }
    rows = [control(f"w{i}", s, 100.0 + i) for i in range(1, 4) for s in ("s1", "s3")]
    source.write_text(json.dumps(older) + "\n" + "".join(json.dumps(r.model_dump(mode="json")) + "\n" for r in rows))
    assert fairwin("archive", "migrate", "--archive", postgres_url).returncode == 0
    done = fairwin("archive", "import", str(source), "--archive", postgres_url)
    assert done.returncode == 0 and "imported 7 rows of 4 windows" in done.stdout, done.stderr
    again = fairwin("archive", "import", str(source), "--archive", postgres_url)
    assert "imported 0 rows of 4 windows" in again.stdout and "7 were there already" in again.stdout
    exported = tmp_path / "back.jsonl"
    back_out = fairwin("archive", "export", str(exported), "--archive", postgres_url)  # the older positional form
    assert back_out.returncode == 0, back_out.stderr
    assert open_archive(exported).snapshot().digest == open_archive(source).snapshot().digest
    back = [json.loads(line) for line in exported.read_text().splitlines()]
    assert back[0] == {
        **older,
        "format": "fairwin.archive/2",
        "repeats": [
            {
                **older["repeats"][0],
                "accepted_per_round": None,
                "decode_tps": None,
                "ms_per_round": None,
                "ttft_s": None,
            }
        ],
        **dict.fromkeys(
            (
                "production_commit",
                "prompt_tokens",
                "concurrency",
                "temperature",
                "hosts",
                "gpu_model",
                "gpu_count",
                "clock_caps_mhz",
            )
        ),
    }


def test_stats_groups_by_every_key_with_each_groups_spread(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    store = open_archive(path)
    for i in range(4):
        store.append([control(f"w{i}", "s1", 100.0 + i), control(f"w{i}", "s3", 100.0 - i, role="P")])
    store.append([control("w9", "s1", 100.0, clock_caps_mhz={"gpu-a": 2100.0, "gpu-b": 2100.0})])
    done = fairwin("archive", "stats", "--archive", str(path), "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    # In the order each key first appears in time: P's w3 control ran first.
    assert [(g["key"]["role"], g["key"]["clock_caps_mhz"], g["control_starts"]) for g in found] == [
        ("P", {"gpu-a": 1980.0, "gpu-b": None}, 4),
        ("A", {"gpu-a": 1980.0, "gpu-b": None}, 4),
        ("A", {"gpu-a": 2100.0, "gpu-b": 2100.0}, 1),
    ]
    rate = next(n for n in found[1]["noise"] if n["metric"] == "pooled_rate_tps")
    assert (rate["starts"], rate["windows"]) == (4, 4) and rate["launch_cv_pct"] > 0
    only = json.loads(fairwin("archive", "stats", "--archive", str(path), "--role", "P", "--json").stdout)
    assert [g["key"]["role"] for g in only] == ["P"]
    table = fairwin("archive", "stats", "--archive", str(path))
    assert "role P" in table.stdout and "(by host: gpu-a 2100 MHz" in table.stdout.replace("\n", " ")


#: Each writer's windows, appended one at a time as windows append theirs (each append its own connection on
#: PostgreSQL, where a scram-sha-256 login is most of an append's cost): 200 took 15.4 s; 100 still overlap all
#: eight writers for most of their run.
WINDOWS = 100
WRITER = textwrap.dedent("""
    import sys
    from fairwin.archive import ArchivedRepeat, ArchiveRow, open_archive
    location, worker, windows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = open_archive(location)
    for n in range(windows):
        window = f"w{worker}-{n}"
        rows = [ArchiveRow(window_id=window, time=float(n), commit=None, mode="controlled", role="A", start=s,
                           cell="short", max_tokens=32, clock_cap_mhz=None,
                           repeats=[ArchivedRepeat(repeat=r, pooled_rate_tps=100.0 + r) for r in (1, 2, 3)])
                for s in ("s1", "s3")]
        store.append(rows)
        if n % 10 == 0:
            assert store.append(rows).added == 0  # a retry: nothing twice
""")


@pytest.mark.slow
@pytest.mark.alone  # eight processes load every core: beside a window they would starve its client
def test_eight_writers_of_a_hundred_windows_each_lose_nothing_and_duplicate_nothing(store: ArchiveStore) -> None:
    location = str(getattr(store, "url", store.location))
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, location, str(w), str(WINDOWS)]) for w in range(8)]
    assert [w.wait(timeout=300) for w in writers] == [0] * 8
    snapshot = store.snapshot()
    assert snapshot.count == 8 * WINDOWS * 2 and snapshot.problems == ()
    assert {r.identity for r in snapshot.rows} == {
        (f"w{w}-{n}", s, "short") for w in range(8) for n in range(WINDOWS) for s in ("s1", "s3")
    }
    assert all(len(r.repeats) == 3 for r in snapshot.rows)
    if isinstance(store, PostgresArchive):
        return
    path = Path(store.location)
    with path.open("a") as handle:  # a writer killed mid-line
        handle.write('{"format": "fairwin.archive/2", "window_id": "w8-0", "st')
    torn = store.snapshot()
    assert torn.count == snapshot.count and len(torn.problems) == 1
    assert f"{path}:{8 * WINDOWS * 2 + 1}: torn line (no newline: a writer was interrupted)" in torn.problems[0]
    done = fairwin("archive", "stats", "--archive", str(path))
    assert done.returncode == 0 and "torn line" in done.stderr


def test_an_import_is_replaced_and_dropped_by_its_id_and_a_windows_rows_stay(store: ArchiveStore) -> None:
    own = control("w0", "s1", 90.0)
    store.append([own])
    wrong = [control(f"t{i}", "s1", 100.0 + i, prompt_tokens=64, imported="imp-a") for i in range(3)]
    assert store.replace_import(None, wrong).added == 3
    # The corrected import: the same starts, keyed as they really were; the wrong ones go in the same write.
    right = [row.model_copy(update={"prompt_tokens": 1024, "imported": "imp-b"}) for row in wrong]
    done = store.replace_import("imp-a", right)
    assert (done.dropped, done.added, done.already) == (3, 3, 0)
    snapshot = store.snapshot()
    assert [(r.window_id, r.prompt_tokens, r.imported) for r in snapshot.rows] == [
        ("w0", 64, None),
        ("t0", 1024, "imp-b"),
        ("t1", 1024, "imp-b"),
        ("t2", 1024, "imp-b"),
    ]
    assert snapshot.problems == ()
    with pytest.raises(InputError, match="no import imp-a here"):
        store.replace_import("imp-a", [])  # dropped already
    assert store.replace_import("imp-b", []).dropped == 3
    assert [r.window_id for r in store.snapshot().rows] == ["w0"]
    # The same starts imported again once their import was dropped: they are not "there already".
    assert store.replace_import(None, [r.model_copy(update={"imported": "imp-c"}) for r in wrong]).added == 3
