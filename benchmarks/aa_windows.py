"""K A/A windows on the real vLLM for CPU, and how often each registered rule calls them WIN or LOSS.

An A/A window runs the same role in every start (the e2e plan's mode `spec-vs-spec`:
n-gram speculation on every start), so any WIN or LOSS is a false one. Each window is
run by the CLI with the plan's default rule, as a user would. Its first three starts
are a bracket of their own (read control, candidate, control: in an A/A window the
kind is only a label), so every registered three-start rule decides those rows too
(`fairwin decide --pooled ... --rule ...`): every rule is judged on the same
measurements. Also reported per window: the
candidate's effect on the primary, the spread of the first kind's starts, and how many
streams' client timing was untrusted.

    make engine && set -a && source .engine.env && set +a
    python benchmarks/aa_windows.py [--windows 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from fairwin.rules.registry import RULES


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
    """The window's own verdict, and every three-start rule's on its first three starts."""
    called = {json.loads((window / "decision.json").read_text())["rule_id"]: read_verdict(window)}
    bracket = window / "bracket.jsonl"
    rows = [json.loads(line) for line in (window / "pooled.jsonl").read_text().splitlines() if line]
    # Every start ran the same role, so which kind a start is called is a label: read the first three
    # control-first, the order win2-v1 is registered for.
    labels = {"s1": "control", "s2": "candidate", "s3": "control"}
    bracket.write_text(
        "".join(json.dumps({**r, "kind": labels[r["start"]]}) + "\n" for r in rows if r["start"] in labels)
    )
    for rule in sorted(r.id for r in RULES.values() if r.start_count == 3):
        done = fairwin("decide", "--pooled", str(bracket), "--mode", "spec-vs-spec", "--rule", rule, "--json")
        if done.returncode != 0:
            raise SystemExit(f"fairwin decide failed: {done.stderr.strip()}")
        (decision,) = json.loads(done.stdout)["decisions"]
        called[f"{rule} (s1-s3)"] = decision["verdict"]
    return called


def read_verdict(window: Path) -> str:
    verdict: str = json.loads((window / "decision.json").read_text())["verdict"]
    return verdict


def describe(window: Path) -> str:
    decision = json.loads((window / "decision.json").read_text())
    parts = []
    for cell in decision["cells"]:
        estimate = (cell.get("primary") or {}).get("estimate") or {}
        spread = (cell.get("noise") or {}).get("off_off_spread_pct") or []
        parts.append(
            f"{cell['cell']} {cell['verdict']} primary {estimate.get('point_pct', float('nan')):+.1f} % "
            f"[{estimate.get('ci_low_pct', float('nan')):+.1f}, {estimate.get('ci_high_pct', float('nan')):+.1f}], "
            f"launch s.d. {estimate.get('launch_cv_pct') or float('nan'):.1f} %, "
            f"first kind's starts apart by up to {max(spread, default=float('nan')):.1f} %"
        )
    streams = [json.loads(line) for line in (window / "streams.jsonl").read_text().splitlines() if line]
    untrusted = sum(1 for s in streams if s["repeat"] > 0 and s.get("client_timing_trusted") is False)
    return "; ".join(parts) + f"; untrusted streams {untrusted}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--keep", help="run the windows in this directory and keep them (default: a temporary one)")
    args = parser.parse_args()
    tally: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    with tempfile.TemporaryDirectory(prefix="fairwin-aa-") as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        for index in range(args.windows):
            window = one_window(base / f"aa{index}")
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
