"""Every door tried with the wrong thing: one line naming what is wrong, a non-zero exit, never a traceback.

Each command and subcommand is driven, in process, with what a new user might hand it by
mistake: a file where a directory is expected and the reverse, a missing path, an empty,
binary, truncated or pathologically nested file, and numbers that mean nothing (nan,
inf, negative, zero, words). Hypothesis picks the pairs; each must be refused with one
line on stderr and a non-zero exit code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairwin.cli import main

DEEP = 50_000  # far past any parser's recursion limit
ROW = {"start": "s1", "cell": "c", "repeat": 1}

#: What a bad file holds, by name.
BAD_FILES: dict[str, bytes] = {
    "empty": b"",
    "binary": bytes(range(256)) * 8,
    "truncated JSON": b'{"format": "fairwin.window/1", "window_id": "w',
    "nested TOML": b"a = " + b"[" * DEEP + b"]" * DEEP + b"\n",
    "nested JSON": b"[" * DEEP + b"]" * DEEP,
    "NUL bytes": b"\0" * 64,
    "a pooled row of nan": json.dumps(
        {"start": "s1", "cell": "c", "repeat": 1, "pooled_rate_tps": float("nan")}
    ).encode(),
    "a pooled row of negative rates": json.dumps(
        {"start": "s1", "cell": "c", "repeat": 1, "decode_tps": -5.0}
    ).encode(),
}
BAD_NUMBERS = ("nan", "inf", "-inf", "-1", "0", "1e400", "many", "")


class Things:
    """The wrong things, made once: each bad file, an empty directory, a directory of torn files, a missing path."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths: dict[str, Path] = {}
        for name, content in BAD_FILES.items():
            path = root / f"{name.replace(' ', '-')}.bin"
            path.write_bytes(content)
            self.paths[f"a file ({name})"] = path
        (root / "empty-dir").mkdir()
        self.paths["an empty directory"] = root / "empty-dir"
        torn = root / "torn-window"
        torn.mkdir()
        for name in ("window.json", "status.json", "context.json", "decision.json", "pooled.jsonl"):
            (torn / name).write_bytes(BAD_FILES["truncated JSON"])
        self.paths["a directory of torn files"] = torn
        self.paths["a missing path"] = root / "no-such-thing"
        self.out = root / "out"


Door = Callable[[Things, Path], list[str]]

#: Commands that take a path, each with the wrong thing put where the path goes.
PATH_DOORS: dict[str, Door] = {
    "plan check": lambda t, x: ["plan", "check", str(x)],
    "plan show": lambda t, x: ["plan", "show", str(x)],
    "run": lambda t, x: ["run", str(x), "--quiet"],
    "recover": lambda t, x: ["recover", str(x)],
    "stage": lambda t, x: ["stage", str(x)],
    "rehearse": lambda t, x: ["rehearse", str(x), "--out", str(t.out / "rehearsal")],
    "production status": lambda t, x: ["production", "status", str(x)],
    "production up": lambda t, x: ["production", "up", str(x)],
    "production down": lambda t, x: ["production", "down", str(x)],
    "production snapshot": lambda t, x: ["production", "snapshot", str(x), "--to", str(t.out / "snap.json")],
    "chain status": lambda t, x: ["chain", "status", str(x)],
    "chain check-prev": lambda t, x: ["chain", "check-prev", str(x)],
    "chain abort": lambda t, x: ["chain", "abort", str(x)],
    "decide": lambda t, x: ["decide", str(x)],
    "decide --pooled": lambda t, x: ["decide", "--pooled", str(x), "--mode", "controlled"],
    "compare": lambda t, x: ["compare", str(x), str(x)],
    "report": lambda t, x: ["report", str(x)],
    "export": lambda t, x: ["export", str(x), "--out", str(t.out / "export")],
    "promote check (window)": lambda t, x: ["promote", "check", str(x), "--policy", str(x)],
    "qualify carry": lambda t, x: [
        "qualify",
        "carry",
        "--plan",
        str(x),
        "--receipt",
        str(x),
        "--qualified-commit",
        "0" * 40,
        "--to",
        str(t.out / "carry.json"),
    ],
    "archive stats": lambda t, x: ["archive", "stats", "--archive", str(x)],
    "archive import": lambda t, x: ["archive", "import", str(x), "--archive", str(t.out / "archive.jsonl")],
    "archive append": lambda t, x: ["archive", "append", str(x), "--archive", str(t.out / "archive.jsonl")],
    "archive migrate": lambda t, x: ["archive", "migrate", "--archive", str(x)],
    "archive export": lambda t, x: ["archive", "export", "--to", str(t.root), "--archive", str(x)],
    "prompts --family": lambda t, x: ["prompts", "--family", f"mine={x}", "--out", str(t.out / "prompts")],
    "gate run --to": lambda t, x: [
        "gate",
        "run",
        "--name",
        "g",
        "--to",
        str(t.root),
        "--artifact",
        str(x),
        "--",
        "true",
    ],
    "rules show": lambda t, x: ["rules", "show", str(x)],
    "budget history": lambda t, x: ["budget", "history", "--dir", str(x)],
    "rules audit --noise-from": lambda t, x: ["rules", "audit", "win2-v1", "--noise-from", str(x), "--cell", "c"],
}

#: Commands that take a number, each given one that means nothing there.
NUMBER_DOORS: dict[str, Callable[[str], list[str]]] = {
    "rules audit --cv": lambda n: ["rules", "audit", "win2-v1", "--cv", n],
    "rules audit --launch-cv": lambda n: ["rules", "audit", "win2-v1", "--cv", "2", "--launch-cv", n],
    "rules audit --trials": lambda n: ["rules", "audit", "win2-v1", "--cv", "2", "--trials", n],
    "rules audit --repeats": lambda n: ["rules", "audit", "win2-v1", "--cv", "2", "--repeats", n],
    "decide --clock-cap-mhz": lambda n: ["decide", "--pooled", "x", "--mode", "controlled", "--clock-cap-mhz", n],
    "archive stats --clock-cap-mhz": lambda n: ["archive", "stats", "--clock-cap-mhz", n],
    "prompts --count": lambda n: ["prompts", "--family", "prose", "--out", "x", "--count", n],
    "sim --ms-per-round": lambda n: ["sim", "--ms-per-round", n],
}
#: Numbers a door takes as meaningful (an effect of 0 %): not refused there.
MEANINGFUL = {("rules audit --launch-cv", "0")}

#: Pairs that are not wrong. An empty directory holds no windows, so there is no history to show; an empty
#: file is an empty archive. And the archive's reader leaves a line it cannot read in place, with a warning
#: naming it, and reads the rest: a crash in the middle of an append must not lock every later window out.
NOT_WRONG = {
    ("budget history", "an empty directory"),
    ("archive import", "a file (empty)"),
    *(("archive stats", f"a file ({name})") for name in BAD_FILES),
}


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusal
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    assert "Traceback" not in err, f"fairwin {' '.join(argv)[:200]}: a traceback\n{err[-2000:]}"
    assert code != 0, f"fairwin {' '.join(argv)[:200]}: exit 0 for wrong input\n{out[-500:]}"
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("note:", "warning:"))]
    assert len(lines) == 1, f"fairwin {' '.join(argv)[:200]}: {len(lines)} lines, not one\n{err[-2000:]}"
    assert "error" in lines[0], lines[0]


@pytest.fixture(scope="module")
def things(tmp_path_factory: pytest.TempPathFactory) -> Things:
    return Things(tmp_path_factory.mktemp("doors"))


THINGS = (
    *(f"a file ({name})" for name in BAD_FILES),
    "an empty directory",
    "a directory of torn files",
    "a missing path",
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(door=st.sampled_from(sorted(PATH_DOORS)), thing=st.sampled_from(THINGS))
def test_a_wrong_path_is_refused_in_one_line(
    door: str, thing: str, things: Things, capsys: pytest.CaptureFixture[str]
) -> None:
    if (door, thing) in NOT_WRONG:
        return
    _refused(PATH_DOORS[door](things, things.paths[thing]), capsys)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(door=st.sampled_from(sorted(NUMBER_DOORS)), number=st.sampled_from(BAD_NUMBERS))
def test_a_number_that_means_nothing_is_refused_in_one_line(
    door: str, number: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if (door, number) in MEANINGFUL:
        return
    _refused(NUMBER_DOORS[door](number), capsys)
