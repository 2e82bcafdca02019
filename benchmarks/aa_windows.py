"""K A/A windows on the real vLLM for CPU, and how often each registered rule calls them WIN or LOSS.

An A/A window runs the same role three times (the e2e plan's mode `spec-vs-spec`: n-gram
speculation on every start), so any WIN or LOSS is a false one. Each window is run by
the CLI, as a user would, then decided again from its stored rows under every
registered rule (`fairwin decide WINDOW --rule ...`). Also reported per window: the
candidate's effect on the primary, the OFF/OFF spread, and how many streams' client
timing was untrusted.

    make engine && set -a && source .engine.env && set +a
    python benchmarks/aa_windows.py [--windows 5]
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from fairwin.decision.rules import RULES


def fairwin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fairwin", *args], capture_output=True, text=True, timeout=3600)


def one_window(directory: Path) -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the e2e plan lives with the tests
    from tests.e2e.conftest import e2e_plan

    plan = e2e_plan(directory)
    done = fairwin("run", str(plan), "--mode", "spec-vs-spec", "--quiet")
    if done.returncode != 0:
        raise SystemExit(f"the A/A window failed: {done.stderr.strip()}")
    (window,) = [p for p in (directory / "windows").iterdir() if p.is_dir()]
    return window


def verdicts(window: Path) -> dict[str, str]:
    args = [arg for rule in sorted(RULES) for arg in ("--rule", rule)]
    done = fairwin("decide", str(window), *args, "--json")
    if done.returncode != 0:
        raise SystemExit(f"fairwin decide failed: {done.stderr.strip()}")
    documents = json.loads(done.stdout)
    documents = documents if isinstance(documents, list) else [documents]
    return {d["rule_id"]: d["verdict"] for d in documents}


def describe(window: Path) -> str:
    decision = json.loads((window / "decision.json").read_text())
    parts = []
    for cell in decision["cells"]:
        estimate = (cell.get("primary") or {}).get("estimate") or {}
        spread = (cell.get("noise") or {}).get("off_off_spread_pct") or []
        parts.append(
            f"{cell['cell']} {cell['verdict']} primary {estimate.get('point_pct', float('nan')):+.1f} %, "
            f"OFF/OFF up to {max(spread, default=float('nan')):.1f} %"
        )
    streams = [json.loads(line) for line in (window / "streams.jsonl").read_text().splitlines() if line]
    untrusted = sum(1 for s in streams if s["repeat"] > 0 and s.get("client_timing_trusted") is False)
    return "; ".join(parts) + f"; untrusted streams {untrusted}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--windows", type=int, default=5)
    args = parser.parse_args()
    tally: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    with tempfile.TemporaryDirectory(prefix="fairwin-aa-") as tmp:
        for index in range(args.windows):
            window = one_window(Path(tmp) / f"aa{index}")
            called = verdicts(window)
            for rule, verdict in called.items():
                tally[rule][verdict] += 1
            print(f"window {index + 1}: {', '.join(f'{r} {v}' for r, v in sorted(called.items()))}")
            print(f"    {describe(window)}")
    for rule, counts in sorted(tally.items()):
        wrong = counts["WIN"] + counts["LOSS"]
        print(f"{rule}: {wrong} of {args.windows} A/A windows called WIN or LOSS ({dict(sorted(counts.items()))})")


if __name__ == "__main__":
    main()
