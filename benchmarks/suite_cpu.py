"""Where the test suite's CPU goes: each Python process it starts, by what it was (a `fairwin` command, a sim, a
pytest worker) and by the test file that started it, and the share a fresh process's imports take.

    .venv/bin/python benchmarks/suite_cpu.py [--top N] [-- PYTEST ARGS ...]   # default: the unit and integration part

Every Python process the run starts (pytest's workers, each `fairwin` command, each `fairwin sim`, the stand-in
`nvidia-smi`) loads a `sitecustomize` from a scratch directory put first on PYTHONPATH: at exit it appends its own
CPU seconds and its argv to one log (the kernel's account, ``os.times``; a process killed by SIGKILL writes
nothing, so the total is a floor). Each command's import cost is measured apart, as the CPU seconds of a process
that only imports what the command imports. Written by hand because what it needs is one ``atexit`` hook; process
accounting (``acct``) would need root and a package, and names only the executable (python3), not the command.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PART = ["tests/integration", "tests/unit", "-m", "not alone", "-n", str(3 * (os.cpu_count() or 1)), "--dist"]
PART += ["loadfile", "--no-loadscope-reorder", "-q", "-p", "no:cacheprovider"]

HOOK = """
import atexit, os, sys

def _account():
    times = os.times()
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split("::")[0]  # pytest sets it; its children inherit it
    line = f"{times.user + times.system:.3f}\\t{test}\\t{' '.join(sys.argv[:3])[:160]}\\n"
    fd = os.open(os.environ["FAIRWIN_CPU_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one write under O_APPEND: lines of concurrent processes never interleave
    finally:
        os.close(fd)

atexit.register(_account)
"""

#: What each kind of process imports before its first step: its import cost is a process that imports only that.
IMPORTS = {
    "fairwin run": "import fairwin.window.run; from scipy import special",
    "fairwin sim": "import fairwin.sim.app",
    "fairwin production": "import fairwin.production.control, aiohttp",
    "fairwin (other)": "import fairwin.cli",
}


def kind(argv: str) -> str:
    """What a logged process was, from its argv (``python -m fairwin CMD`` logs fairwin/__main__.py first)."""
    words = argv.split()
    first = words[0] if words else ""
    if first.endswith("fairwin/__main__.py") and len(words) > 1:
        name = f"fairwin {words[1]}"
        return name if name in IMPORTS else "fairwin (other)"
    if "pytest" in first or first == "-c":  # pytest itself, and its xdist workers (execnet starts them with -c)
        return "pytest (workers and in-process tests)"
    return "other Python"


def import_cost(statement: str, tries: int = 5) -> float:
    """The least CPU seconds a fresh interpreter takes to run ``statement`` (its imports), of ``tries``."""
    probe = f"{statement}\nimport os; t = os.times(); print(t.user + t.system)"
    return min(
        float(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout)
        for _ in range(tries)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--top", type=int, default=25, help="how many test files to list by CPU (default 25)")
    parser.add_argument("pytest_args", nargs="*", help="what pytest runs (default: the unit and integration part)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "sitecustomize.py").write_text(HOOK)
        log = Path(scratch) / "cpu.log"
        path = os.pathsep.join(p for p in (scratch, os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "PYTHONPATH": path, "FAIRWIN_CPU_LOG": str(log)}
        start, before = time.monotonic(), os.times()
        done = subprocess.run([sys.executable, "-m", "pytest", *(args.pytest_args or PART)], cwd=REPO, env=env)
        wall, after = time.monotonic() - start, os.times()
        lines = log.read_text().splitlines() if log.exists() else []
    children = (after.children_user + after.children_system) - (before.children_user + before.children_system)
    seconds: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    by_file: dict[str, float] = defaultdict(float)
    for line in lines:
        cpu, test, argv = line.split("\t", 2)
        seconds[kind(argv)] += float(cpu)
        count[kind(argv)] += 1
        if test:
            by_file[test] += float(cpu)
    logged = sum(seconds.values())
    print(f"pytest exit {done.returncode}; wall {wall:.1f} s; CPU of everything it waited for {children:.1f} s")
    print(f"Python processes logged: {sum(count.values())}, {logged:.1f} CPU s ({logged / children:.0%} of it)")
    print(f"{'kind':40} {'processes':>9} {'CPU s':>8} {'each':>6} {'imports':>8}")
    for name in sorted(seconds, key=seconds.__getitem__, reverse=True):
        imports = f"{import_cost(IMPORTS[name]):.2f}" if name in IMPORTS else ""
        each = seconds[name] / count[name]
        print(f"{name:40} {count[name]:9} {seconds[name]:8.1f} {each:6.2f} {imports:>8}")
    print("imports: CPU s of a process importing only what the kind imports first; for `fairwin (other)` the")
    print("command line's own, a floor (each command imports its own modules beyond it); the tests' fairwin")
    print("commands are forked from a server that imported the library (tests/forked.py) and pay none of it")
    print(f"\nthe {args.top} test files whose processes used the most CPU (their pytest worker's own not counted):")
    for name in sorted(by_file, key=by_file.__getitem__, reverse=True)[: args.top]:
        print(f"  {by_file[name]:7.1f} s  {name}")
    raise SystemExit(done.returncode)


if __name__ == "__main__":
    main()
