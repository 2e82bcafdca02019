"""Every gate, in order, before any host is touched; and the budget's record after the window.

1. qualification carry (``--qualification CARRIED.json``): CARRIED, to the commit under test;
2. correctness receipts (``--require-gate R``): PASS at that commit, for the qualified artifacts;
   the API rehearsal (``--require-rehearsal DIR``): PASS, for the plan's URL and sha256, recent enough;
3. runtime declarations (in :func:`fairwin.window.run.preflight`): derived environments, speculative configs;
4. the budget: the estimate must fit the plan's limits.

Any refusal raises :class:`GateRefused` (exit 4) and nothing has been started.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairwin.errors import GateRefused
from fairwin.gates.budget import Estimate, calibrate, check_budget, estimate
from fairwin.gates.correctness import require_gate
from fairwin.gates.qualify import CARRY_FORMAT, resolve
from fairwin.gates.receipt import read_receipt
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.models import Mode
from fairwin.receipts import read_jsonl


@dataclass(frozen=True)
class GateInputs:
    qualification: Path | None = None
    gates: list[Path] = field(default_factory=list)
    rehearsal: Path | None = None


def estimates(loaded: LoadedPlan, output_dir: Path) -> list[Estimate]:
    """The budget of every mode the plan can run, calibrated from the windows already in ``output_dir``."""
    found = calibrate(output_dir)
    return [estimate(loaded, name, mode, found) for name, mode in loaded.plan.all_modes().items()]


def run_gates(loaded: LoadedPlan, mode_name: str, mode: Mode, inputs: GateInputs, output_dir: Path) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    artifacts: dict[str, str] | None = None
    if inputs.qualification is not None or inputs.gates:
        repo = loaded.resolve(loaded.plan.qualification.repo)
        head = resolve(repo, "HEAD")
        summary["head"] = head
        if inputs.qualification is not None:
            carried = read_receipt(inputs.qualification, CARRY_FORMAT)
            if carried.get("verdict") != "CARRIED":
                raise GateRefused(f"qualification {inputs.qualification} is {carried.get('verdict')}, not CARRIED")
            if carried.get("head") != head:
                raise GateRefused(
                    f"qualification {inputs.qualification} was carried to {str(carried.get('head'))[:12]}, but the "
                    f"commit under test is {head[:12]}; run `fairwin qualify carry` again"
                )
            artifacts = carried.get("artifacts", {})
            summary["qualification"] = {"path": str(inputs.qualification), "sha256": carried.get("sha256")}
        summary["gates"] = [
            {"path": str(path), "sha256": require_gate(path, head, artifacts).get("sha256")} for path in inputs.gates
        ]
    if inputs.rehearsal is not None:
        from fairwin.rehearse import require_rehearsal  # the rehearsal module imports the gates' receipts

        document = require_rehearsal(inputs.rehearsal, loaded)
        summary["rehearsal"] = {"path": str(inputs.rehearsal), "sha256": document.get("sha256")}
    found = estimate(loaded, mode_name, mode, calibrate(output_dir))
    check_budget(loaded, found)
    summary["budget"] = budget_record(found)
    return summary


def budget_record(found: Estimate) -> dict[str, Any]:
    return {
        "measurement_end_s": found.measurement_end_s,
        "reserve_total_s": found.reserve_total_s,
        "dry_bound_s": found.dry_bound_s,
        "per_start_s": {cost.start: cost.total_s for cost in found.starts},
        "sources": found.sources,
    }


def actual_times(journal: Path) -> dict[str, float]:
    """Seconds from the window's open to the end of each step, from its journal."""
    events = read_jsonl(journal)
    opened = next(e["time"] for e in events if e["step"] == "open" and e["event"] == "begin")
    return {e["step"]: e["time"] - opened for e in events if e["event"] == "end"}
