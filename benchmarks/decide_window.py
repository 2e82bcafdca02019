"""How long `fairwin decide WINDOW` takes, as a user runs it: a fresh process, start to exit.

It reads and checks the window's sealed files, recomputes the decision and compares it
with the record. Five runs (plus one uncounted, to warm the page cache), the median
reported beside the fastest and slowest, and the in-process time of the recomputation
alone (import time excluded).

    python benchmarks/decide_window.py [WINDOW]      # default: the newest complete window in windows/
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = 5


def newest_complete(directory: Path) -> Path:
    done = [
        p for p in directory.iterdir()
        if (p / "status.json").is_file() and json.loads((p / "status.json").read_text()).get("state") == "complete"
    ]  # fmt: skip
    if not done:
        raise SystemExit(f"no complete window in {directory}; run `make demo` first, or name one")
    return max(done, key=lambda p: p.name)


def one_run(window: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "fairwin", "decide", str(window)], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"fairwin decide failed: {done.stderr.strip()}")
    return seconds


def in_process(window: Path) -> float:
    from fairwin.verdict.stored import decide_window

    decide_window(window)  # imports and caches warmed
    started = time.perf_counter()
    decide_window(window)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("window", nargs="?", type=Path)
    args = parser.parse_args()
    window = args.window or newest_complete(Path("windows"))
    one_run(window)
    times = [one_run(window) for _ in range(RUNS)]
    rule = json.loads((window / "window.json").read_text())["rule_id"]
    print(f"window {window.name} (rule {rule})")
    print(f"fairwin decide WINDOW: median {statistics.median(times):.3f} s of {RUNS} "
          f"(fastest {min(times):.3f} s, slowest {max(times):.3f} s)")  # fmt: skip
    print(f"the recomputation alone, in process: {in_process(window) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
