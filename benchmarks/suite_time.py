"""The time a person waits for `make test`: each part's wall time and the slowest tests, quiet or beside busy loops.

Runs `make test` in this checkout (engines cached, tools installed: the steps that install them are timed too, as
"lint, tools and engine checks") and has each of its pytest sessions record its wall time and each test's seconds
(tests/conftest.py, ``FAIRWIN_SUITE_TIMES``). With ``--hogs N``, N busy loops run beside the whole suite, each in
a session of its own at the default priority, as a neighbour's jobs would: a stand-in for a slower machine.

    python benchmarks/suite_time.py [--hogs 2] [--top 15] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
HOG = [sys.executable, "-c", "while True: pass"]


def part_name(args: list[str]) -> str:
    """Which part of `make test` a pytest session was, from its arguments."""
    if any("tests/e2e" in arg for arg in args):
        return "e2e"
    if "alone" in args and not any(arg.startswith("not alone") for arg in args):
        return "alone"
    return "unit and integration"


def run_suite(hogs: int) -> tuple[float, int, list[dict[str, Any]]]:
    """``make test``'s wall time, its exit status and each pytest session's record."""
    with tempfile.TemporaryDirectory() as scratch:
        record = Path(scratch) / "sessions.jsonl"
        busy = [subprocess.Popen(HOG, start_new_session=True) for _ in range(hogs)]
        try:
            t0 = time.monotonic()
            done = subprocess.run(
                ["make", "test"], cwd=REPO, env={**os.environ, "FAIRWIN_SUITE_TIMES": str(record)}, check=False
            )
            wall = time.monotonic() - t0
        finally:
            for hog in busy:
                hog.kill()
                hog.wait()
        sessions = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return wall, done.returncode, sessions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hogs", type=int, default=0, help="busy loops beside the suite (default: none)")
    parser.add_argument("--top", type=int, default=15, help="how many of the slowest tests to list")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    wall, status, sessions = run_suite(args.hogs)
    parts = {part_name(s["args"]): s["wall_s"] for s in sessions}
    parts["lint, tools and engine checks"] = wall - sum(parts.values())
    tests = sorted(((sec, node) for s in sessions for node, sec in s["tests"].items()), reverse=True)[: args.top]
    print(f"make test beside {args.hogs} busy loop(s): {wall / 60:.1f} min ({wall:.0f} s), exit {status}")
    for name, seconds in parts.items():
        print(f"  {name:<30} {seconds:7.1f} s")
    print(f"the {args.top} slowest tests (setup, call and teardown):")
    for seconds, node in tests:
        print(f"  {seconds:7.1f} s  {node}")
    if args.json is not None:
        figures = {"hogs": args.hogs, "wall_s": wall, "exit": status, "parts_s": parts, "slowest": tests}
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    raise SystemExit(status)


if __name__ == "__main__":
    main()
