"""The time a person waits for `make test`: each part's wall time against its bound, and the slowest tests.

Runs `make setup` in this checkout, timed apart as "environment" (the virtual environment a fresh clone makes once,
an install the bounds leave out as they leave out the engines' builds), then `make test` (engines cached, tools
installed: the steps that check them are timed, as "lint, tools and engine checks"), and has each of its pytest
sessions record its wall time and each test's seconds
(tests/conftest.py, ``FAIRWIN_SUITE_TIMES``). With ``--hogs N`` it runs ``make test HOG=N``: N busy loops beside
the unit, integration and `alone` tests (tools/with-cpu-hog.sh), the e2e windows quiet, as make test runs them.

The bounds (#49, a 2-core machine, engines cached): quiet, everything before the e2e part within 7 minutes, the e2e
part within 8 and the whole within 15; beside two busy loops, everything before the e2e part within 15.

Before `make setup` and after `make test` it times one fixed loop on one core, 15 times over (``speed_probe``): on a
shared virtual machine the same loop, the machine otherwise idle, took 0.68 to 1.00 s in eight runs in a row
(2026-12-06), so a part's time is only comparable between runs beside the machine's own speed at the time.

    python benchmarks/suite_time.py [--hogs 2] [--top 15] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def part_name(args: list[str]) -> str:
    """Which part of `make test` a pytest session was, from its arguments."""
    if any("tests/e2e" in arg for arg in args):
        return "e2e"
    if "alone" in args and not any(arg.startswith("not alone") for arg in args):
        return "alone"
    return "unit and integration"


#: Each bound in seconds: (the part, quiet or beside busy loops) -> its most.
BOUNDS = {
    ("before e2e", False): 7 * 60,
    ("e2e", False): 8 * 60,
    ("make test", False): 15 * 60,
    ("before e2e", True): 15 * 60,
}


def speed_probe(times: int = 15) -> list[float]:
    """Seconds each of ``times`` runs of one fixed single-threaded loop took, here and now."""
    seconds = []
    for _ in range(times):
        began = time.perf_counter()
        sum(i * i for i in range(3_000_000))
        seconds.append(time.perf_counter() - began)
    return seconds


def probe_line(when: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)
    return (
        f"the machine's speed {when}: a fixed loop on one core took {statistics.median(ordered):.3f} s "
        f"(median of {len(ordered)}; {ordered[0]:.3f} to {ordered[-1]:.3f})"
    )


def run_suite(hogs: int) -> tuple[float, float, int, list[dict[str, Any]]]:
    """``make setup``'s wall time, then ``make test``'s, its exit status and each pytest session's record."""
    with tempfile.TemporaryDirectory() as scratch:
        record = Path(scratch) / "sessions.jsonl"
        t0 = time.monotonic()
        subprocess.run(["make", "setup"], cwd=REPO, check=True)
        environment = time.monotonic() - t0
        t0 = time.monotonic()
        done = subprocess.run(
            ["make", "test", f"HOG={hogs}"],
            cwd=REPO,
            env={**os.environ, "FAIRWIN_SUITE_TIMES": str(record)},
            check=False,
        )
        wall = time.monotonic() - t0
        sessions = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return environment, wall, done.returncode, sessions


def against_bounds(wall: float, parts: dict[str, float], hogs: int, status: int) -> list[str]:
    """Each bound that applies, with the part's time and whether it held: not measured where make test failed
    before running the part (a part with no pytest session), whose time would pass as held."""
    measured = {"before e2e": wall - parts.get("e2e", 0.0), "e2e": parts.get("e2e", 0.0), "make test": wall}
    ran = {"before e2e": "unit and integration" in parts, "e2e": "e2e" in parts}
    ran["make test"] = ran["before e2e"] and ran["e2e"]
    lines = []
    for (part, loaded), bound in BOUNDS.items():
        if loaded != bool(hogs):
            continue
        if not ran[part] and status != 0:
            lines.append(f"  {part:<12} not measured: make test stopped (exit {status}) before it ran")
            continue
        held = "held" if measured[part] <= bound else "EXCEEDED"
        lines.append(f"  {part:<12} {measured[part]:7.1f} s of {bound} s: {held}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hogs", type=int, default=0, help="busy loops beside the parts before e2e (default: none)")
    parser.add_argument("--top", type=int, default=15, help="how many of the slowest tests to list")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    before = speed_probe()
    environment, wall, status, sessions = run_suite(args.hogs)
    after = speed_probe()
    parts = {part_name(s["args"]): s["wall_s"] for s in sessions}
    parts["lint, tools and engine checks"] = wall - sum(parts.values())
    tests = sorted(((sec, node) for s in sessions for node, sec in s["tests"].items()), reverse=True)[: args.top]
    print(probe_line("before", before))
    print(probe_line("after", after))
    print(f"make setup (the environment, not bounded): {environment:.1f} s")
    print(f"make test HOG={args.hogs}: {wall / 60:.1f} min ({wall:.0f} s), exit {status}")
    for name, seconds in parts.items():
        print(f"  {name:<30} {seconds:7.1f} s")
    print("the bounds:")
    print("\n".join(against_bounds(wall, parts, args.hogs, status)))
    print(f"the {args.top} slowest tests (setup, call and teardown):")
    for seconds, node in tests:
        print(f"  {seconds:7.1f} s  {node}")
    if args.json is not None:
        figures = {
            "hogs": args.hogs,
            "environment_s": environment,
            "wall_s": wall,
            "exit": status,
            "parts_s": parts,
            "slowest": tests,
            "speed_probe_s": {"before": before, "after": after},
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    raise SystemExit(status)


if __name__ == "__main__":
    main()
