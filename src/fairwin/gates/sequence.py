"""Every gate, in order, before any host is touched; and the budget's record after the window.

1. qualification carry (``--qualification CARRIED.json``): CARRIED, to the commit under test;
2. correctness receipts (``--require-gate R``): PASS at that commit, for the qualified artifacts;
   the API rehearsal (``--require-rehearsal DIR``): PASS, for the plan's URL and sha256, recent enough;
3. runtime declarations (in :func:`fairwin.window.preflight.preflight`): derived environments, speculative configs;
4. the budget: the estimate must fit the plan's limits.

Any refusal raises :class:`GateRefused` (exit 4) and nothing has been started.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fairwin.directory.gate_summary import BudgetEstimate, GateSummary, QualificationRef, ReceiptRef
from fairwin.errors import GateRefused
from fairwin.gates.budget import check_budget
from fairwin.gates.calibration import calibrate
from fairwin.gates.correctness import bind_to_hosts, require_gate
from fairwin.gates.estimate import TimeEstimate, estimate
from fairwin.gates.qualify import require_carry, require_commit, resolve
from fairwin.gates.rehearsal import require_rehearsal
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.models import Mode


@dataclass(frozen=True)
class GateInputs:
    qualification: Path | None = None
    gates: list[Path] = field(default_factory=list)
    rehearsal: Path | None = None
    expected_commit: str | None = None  # --expected-commit; else the plan's window.expected_commit


def estimates(loaded: LoadedPlan, output_dir: Path, archive_starts: int = 0) -> list[TimeEstimate]:
    """The budget of every mode the plan can run, calibrated from the windows already in ``output_dir``;
    ``archive_starts``: the fewest archived control starts of a deciding cell (a sequential rule's first look)."""
    found = calibrate(output_dir)
    return [estimate(loaded, name, mode, found, archive_starts) for name, mode in loaded.plan.all_modes().items()]


#: What a carried qualification vouches for besides the repository's files: the runbook carries its cells file and
#: its candidate's env file with the qualification, so the plan's cells and prompt families, and every role's and
#: worker's command and environment, are what was qualified. "*" is any one key.
QUALIFIED = (
    ("cells",),
    ("families",),
    *(
        (*role, field)
        for role in (("roles", "*"), ("roles", "*", "workers", "*"))
        for field in ("argv", "env", "env_files", "unset_env", "base", "speculative", "container", "inherit_env")
    ),
)


def _covers(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    return len(path) >= len(pattern) and all(want in ("*", got) for want, got in zip(pattern, path, strict=False))


def refuse_vouched_overrides(loaded: LoadedPlan, inputs: GateInputs) -> None:
    """With a qualification given, a ``--set`` of anything it vouches for is refused (exit 4), naming the key: what
    was qualified must not move without a new qualification. Overrides of anything else (a pinned commit given
    per launch, as the runbook's ``--worker-commit``) stay allowed, and are recorded in window.json. (A rehearsal
    binds the effective plan field by field itself: an override of what it tried is refused there, naming it.)"""
    if inputs.qualification is None:
        return
    for change in loaded.overrides:
        if any(_covers(pattern, change.path) for pattern in QUALIFIED):
            raise GateRefused(
                f"--set {change.key}: the qualification {inputs.qualification} vouches for it, and an override "
                "would move what was qualified; change the plan and qualify it again, or run without the override"
            )


def check_required(loaded: LoadedPlan, inputs: GateInputs, gate_names: list[str]) -> None:
    """Refuse (exit 4) when a gate the plan requires was not given: it cannot be skipped by forgetting it."""
    given = {"qualification": inputs.qualification is not None, "rehearsal": inputs.rehearsal is not None}
    given.update({f"gate:{name}": True for name in gate_names})
    how = {
        "qualification": "--qualification CARRIED.json (from `fairwin qualify carry`)",
        "rehearsal": "--require-rehearsal DIR (from `fairwin rehearse`)",
    }
    for gate in loaded.plan.gates.required:
        if not given.get(gate):
            hint = how.get(gate, f"--require-gate RECEIPT (from `fairwin gate run --name {gate[5:]}`)")
            raise GateRefused(f"the plan requires gate {gate}, and it was not given; pass {hint}")


def identity_pins(loaded: LoadedPlan, mode: Mode) -> tuple[dict[str, list[str]], bool]:
    """sha256 -> where the mode's roles and workers pin it on their hosts; and whether any runs on another host."""
    pins: dict[str, list[str]] = {}
    remote = False
    for name in sorted({mode.control, mode.candidate}):
        role = loaded.plan.roles[name]
        members = [(f"role {name}", role.host, role.identity)]
        members += [(f"role {name} worker {i}", w.host, w.identity) for i, w in enumerate(role.workers, 1)]
        for label, host, identity in members:
            remote = remote or host is not None
            for path, digest in identity.items():
                pins.setdefault(digest, []).append(f"{label} on host {host or 'here'}: {path}")
    return pins, remote


def run_gates(
    loaded: LoadedPlan, mode_name: str, mode: Mode, inputs: GateInputs, output_dir: Path, archive_starts: int = 0
) -> GateSummary:
    """``archive_starts``: the fewest archived control starts of a deciding cell (a sequential rule's first look)."""
    refuse_vouched_overrides(loaded, inputs)
    expected = inputs.expected_commit or loaded.plan.window.expected_commit
    expected_commit = None
    if expected is not None:
        expected_commit = require_commit(loaded.resolve(loaded.plan.qualification.repo), expected)
    head = qualification = gates = bound = None
    artifacts: dict[str, str] | None = None
    names: list[str] = []
    if inputs.qualification is not None or inputs.gates:
        repo = loaded.resolve(loaded.plan.qualification.repo)
        head = resolve(repo, "HEAD")
        if inputs.qualification is not None:
            carried = require_carry(inputs.qualification, head, loaded.plan.qualification)
            artifacts = carried.artifacts
            # An admission that was another tool's says how it was read.
            how = carried.admission.get("foreign")
            qualification = QualificationRef(path=str(inputs.qualification), sha256=carried.sha256, admission=how)
        receipts = [require_gate(path, head, artifacts) for path in inputs.gates]
        names = [receipt.name for receipt in receipts]
        gates = [ReceiptRef(path=str(p), sha256=r.sha256) for p, r in zip(inputs.gates, receipts, strict=True)]
        bound = bind_to_hosts(receipts, *identity_pins(loaded, mode)) or None
    check_required(loaded, inputs, names)
    rehearsal = None
    if inputs.rehearsal is not None:
        document = require_rehearsal(inputs.rehearsal, loaded)
        rehearsal = ReceiptRef(path=str(inputs.rehearsal), sha256=document.sha256)
    found = estimate(loaded, mode_name, mode, calibrate(output_dir), archive_starts)
    check_budget(loaded, found)
    return GateSummary(
        expected_commit=expected_commit,
        head=head,
        qualification=qualification,
        gates=gates,
        artifacts_on_hosts=bound,
        rehearsal=rehearsal,
        budget=budget_estimate(found),
    )


def budget_estimate(found: TimeEstimate) -> BudgetEstimate:
    """At the rule's maximum; with a sequential rule's first look beside it."""
    first = found.first_stop
    return BudgetEstimate(
        measurement_end_s=found.measurement_end_s,
        reserve_total_s=found.reserve_total_s,
        dry_bound_s=found.dry_bound_s,
        close_reserve_s=found.close_reserve_s,
        pair_reserve_measured=found.pair_reserve_measured,
        first_look=first,
        first_look_end_s=found.end_after(first),
        per_start_s={cost.start: cost.total_s for cost in found.starts},
        sources=found.sources,
    )
