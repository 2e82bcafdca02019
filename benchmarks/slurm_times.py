"""How long a window on Slurm waits on the scheduler: from `fairwin submit` to the window's first start, and from
the window's end to production, run again by Slurm, answering.

Starts the tests' throwaway cluster (tests/integration/slurm.py: Slurm 22.05 on this machine, scheduling every
0.1 s), then, N times: a sim production as a requeue-able Slurm job on n1, a two-role sim window whose production
is that job, `fairwin submit` followed to its end. Each time is read from the window's own receipts (the journal's
clock): submit's moment to the first start's begin, and the close's end to the moment production answered health
in the return step (its begin plus its proof's seconds); beside it, Slurm's own view (the job's EndTime, whole
seconds, to the first health answer: status.json's `answered_after_s`).

With ``--chain``: N chains of two windows in one hold job (`fairwin submit --chain`, then `--chain-last`): the
first window's close to the second's open, and the last window's close to production answering.

    python benchmarks/slurm_times.py [--runs 5] [--chain]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.conftest import plan_factory  # noqa: E402
from tests.integration.slurm import scheduled_plan, slurm_production, started_cluster  # noqa: E402


def _events(window: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (window / "journal.jsonl").read_text().splitlines()]


def _at(events: list[dict[str, Any]], step: str, event: str) -> dict[str, Any]:
    return next(e for e in events if e["step"] == step and e["event"] == event)


def _submitted(cluster: Any, scratch: Path, name: str, *submissions: tuple[str, ...]) -> tuple[float, list[Path]]:
    """A sim production run as Slurm job ``name`` on n1, and `fairwin submit` of its plan once per flag tuple, one
    after the other: when the first was submitted, and the windows they ran, in order."""
    folder = scratch / name
    folder.mkdir()
    with slurm_production(cluster, name, "n1") as (_, port):
        plan = scheduled_plan(plan_factory(folder), name, port, "n1")
        submitted = time.time()
        for flags in submissions:
            done = subprocess.run(
                [sys.executable, "-m", "fairwin", "submit", str(plan), *flags],
                env=cluster.env,
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise SystemExit(f"fairwin submit {' '.join(flags)} failed: {done.stdout}{done.stderr}")
    windows = sorted(p for p in (folder / "windows").iterdir() if p.is_dir() and not p.name.startswith("."))
    return submitted, windows


def _answered(events: list[dict[str, Any]]) -> float:
    """When production answered health in the window's return step (its begin plus its proof's seconds)."""
    return _at(events, "return", "begin")["time"] + _at(events, "return", "end")["up"]["seconds"]


def one_window(cluster: Any, scratch: Path, number: int) -> dict[str, float]:
    submitted, (window,) = _submitted(cluster, scratch, f"prod-{number}", ())
    events = _events(window)
    return {
        "submit_to_first_start_s": _at(events, "start s1", "begin")["time"] - submitted,
        "submit_to_open_s": _at(events, "open", "begin")["time"] - submitted,
        "close_to_production_answering_s": _answered(events) - _at(events, "close", "end")["time"],
        "slurm_end_to_answering_s": _at(events, "return", "end")["slurm"]["answered_after_s"],
    }


def one_chain(cluster: Any, scratch: Path, number: int) -> dict[str, float]:
    """A chain of two windows in one hold job: the first window's close to the second's open (a step of the
    running hold job, its production left down), and the last window's close to production answering (the hold
    job cancelled, Slurm running production again)."""
    submitted, (first, last) = _submitted(cluster, scratch, f"prod-chain-{number}", ("--chain",), ("--chain-last",))
    early, late = _events(first), _events(last)
    return {
        "submit_to_first_start_s": _at(early, "start s1", "begin")["time"] - submitted,
        "close_to_next_open_s": _at(late, "open", "begin")["time"] - _at(early, "close", "end")["time"],
        "last_close_to_production_answering_s": _answered(late) - _at(late, "close", "end")["time"],
        "slurm_end_to_answering_s": _at(late, "return", "end")["slurm"]["answered_after_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--chain", action="store_true", help="chains of two windows in one hold job instead")
    args = parser.parse_args()
    measure = one_chain if args.chain else one_window
    with started_cluster() as cluster, tempfile.TemporaryDirectory() as scratch:
        runs = [measure(cluster, Path(scratch), number) for number in range(args.runs)]
    what = "chains of two windows" if args.chain else "windows"
    print(f"{args.runs} {what} on the test cluster (Slurm 22.05, one machine, 2 cores):")
    for key in runs[0]:
        values = [run[key] for run in runs]
        print(
            f"  {key}: median {statistics.median(values):.2f} s, min {min(values):.2f}, max {max(values):.2f} "
            f"({', '.join(f'{v:.2f}' for v in values)})"
        )


if __name__ == "__main__":
    main()
