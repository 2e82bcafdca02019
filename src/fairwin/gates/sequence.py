"""Every gate, in order, before any host is touched (:data:`GATES`); and the budget's record after the window.

The overrides a qualification vouches for; the expected commit; the qualification carried to the commit under
test (``--qualification CARRIED.json``); each correctness receipt (``--require-gate R``) PASS at that commit for
the qualified artifacts, and held on the hosts that run them; the gates the plan requires; the API rehearsal
(``--require-rehearsal DIR``) for the plan's URL and sha256, recent enough; the budget. Each is a named check
(gates/refusal.py): its refusal (exit 4) names it, and nothing has been started. A window's admission runs them in
its own list (window/admission_checks.py), after the plan's runtime declarations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from fairwin.directory.gate_summary import BudgetEstimate, GateSummary, QualificationRef, ReceiptRef
from fairwin.gates.budget import budget_problems
from fairwin.gates.calibration import calibrate
from fairwin.gates.correctness import GateRunRecord, bind_to_hosts, gate_problems, unbound_artifacts
from fairwin.gates.estimate import TimeEstimate, estimate
from fairwin.gates.qualify import CarryRecord, carry_problems, expected_commit_problems, resolve
from fairwin.gates.receipt import read_receipt
from fairwin.gates.refusal import Check, run_plain
from fairwin.gates.rehearsal import RehearsalRecord, rehearsal_problems
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.modes import Mode


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


def _vouched_overrides(reading: GateReading) -> list[str]:
    """With a qualification given, a ``--set`` of anything it vouches for: what was qualified must not move without
    a new qualification. Overrides of anything else (a pinned commit given per launch, as the runbook's
    ``--worker-commit``) stay allowed, and are recorded in window.json. (A rehearsal binds the effective plan field
    by field itself: an override of what it tried is refused there, naming it.)"""
    inputs = reading.inputs
    if inputs.qualification is None:
        return []
    return [
        f"--set {change.key}: the qualification {inputs.qualification} vouches for it, and an override "
        "would move what was qualified; change the plan and qualify it again, or run without the override"
        for change in reading.loaded.overrides
        if any(_covers(pattern, change.path) for pattern in QUALIFIED)
    ]


def identity_pins(loaded: LoadedPlan, mode: Mode) -> tuple[dict[str, list[str]], bool]:
    """sha256 -> where the mode's roles and workers pin it on their hosts; and whether any runs on another host."""
    pins: dict[str, list[str]] = {}
    remote = False
    for name in sorted(mode.roles):
        role = loaded.plan.roles[name]
        members = [(f"role {name}", role.host, role.identity)]
        members += [(f"role {name} worker {i}", w.host, w.identity) for i, w in enumerate(role.workers, 1)]
        for label, host, identity in members:
            remote = remote or host is not None
            for path, digest in identity.items():
                pins.setdefault(digest, []).append(f"{label} on host {host or 'here'}: {path}")
    return pins, remote


@dataclass
class GateReading:
    """What the gates read, each once: the commit under test and the receipts given, and the time estimate."""

    loaded: LoadedPlan
    mode_name: str
    mode: Mode
    inputs: GateInputs
    output_dir: Path
    archive_starts: int = 0  # the fewest archived control starts of a deciding cell (a sequential rule's first look)
    round_seed: int = 0  # a many-arm window's rounds' orders: its starts' names and roles, estimated as they run

    @cached_property
    def repo(self) -> Path:
        return self.loaded.resolve(self.loaded.plan.qualification.repo)

    @cached_property
    def head(self) -> str | None:
        """The commit under test, where a receipt is given to be bound to it."""
        return self.repo_head if self.inputs.qualification is not None or self.inputs.gates else None

    @cached_property
    def repo_head(self) -> str:
        """The qualification repository's HEAD, asked of git once."""
        return resolve(self.repo, "HEAD")

    @cached_property
    def carried(self) -> CarryRecord | None:
        given = self.inputs.qualification
        return read_receipt(given, CarryRecord) if given is not None else None

    @cached_property
    def receipts(self) -> list[GateRunRecord]:
        return [read_receipt(path, GateRunRecord) for path in self.inputs.gates]

    @cached_property
    def rehearsal(self) -> RehearsalRecord | None:
        given = self.inputs.rehearsal
        return read_receipt(given / "rehearsal.json", RehearsalRecord) if given is not None else None

    @cached_property
    def estimate(self) -> TimeEstimate:
        found = calibrate(self.output_dir)
        return estimate(self.loaded, self.mode_name, self.mode, found, self.archive_starts, self.round_seed)

    @property
    def artifacts(self) -> dict[str, str] | None:
        """The qualified artifacts' sha256 by name, when a qualification was given."""
        return self.carried.artifacts if self.carried is not None else None


def _expected_commit(reading: GateReading) -> list[str]:
    expected = reading.inputs.expected_commit or reading.loaded.plan.window.expected_commit
    return expected_commit_problems(reading.repo, expected, reading.repo_head) if expected is not None else []


def _qualification(reading: GateReading) -> list[str]:
    carried, given = reading.carried, reading.inputs.qualification
    if carried is None or given is None or reading.head is None:
        return []
    return carry_problems(given, carried, reading.head, reading.loaded.plan.qualification)


def _receipts(reading: GateReading) -> list[str]:
    head = reading.head or ""
    pairs = zip(reading.inputs.gates, reading.receipts, strict=True)
    return [problem for path, receipt in pairs for problem in gate_problems(path, receipt, head, reading.artifacts)]


def _artifacts_on_hosts(reading: GateReading) -> list[str]:
    return unbound_artifacts(reading.receipts, *identity_pins(reading.loaded, reading.mode))


def _required(reading: GateReading) -> list[str]:
    """A gate the plan requires that was not given: it cannot be skipped by forgetting it."""
    inputs = reading.inputs
    given = {"qualification": inputs.qualification is not None, "rehearsal": inputs.rehearsal is not None}
    given.update({f"gate:{receipt.name}": True for receipt in reading.receipts})
    how = {
        "qualification": "--qualification CARRIED.json (from `fairwin qualify carry`)",
        "rehearsal": "--require-rehearsal DIR (from `fairwin rehearse`)",
    }
    return [
        f"the plan requires gate {gate}, and it was not given; pass "
        + how.get(gate, f"--require-gate RECEIPT (from `fairwin gate run --name {gate[5:]}`)")
        for gate in reading.loaded.plan.gates.required
        if not given.get(gate)
    ]


def _rehearsal(reading: GateReading) -> list[str]:
    given, document = reading.inputs.rehearsal, reading.rehearsal
    return rehearsal_problems(given, document, reading.loaded) if given is not None and document is not None else []


def _budget(reading: GateReading) -> list[str]:
    return budget_problems(reading.loaded, reading.estimate)


#: The gates, in order: what was qualified has not moved, the commit under test and every receipt at it, then the
#: time budget. Each refuses (exit 4) naming itself; none contacts a host.
GATES: tuple[Check[GateReading], ...] = (
    Check("overrides", "--set keys against what the qualification vouches for", _vouched_overrides),
    Check("expected commit", "the qualification repository's HEAD and work tree", _expected_commit),
    Check("qualification", "the carry receipt (--qualification), to the commit under test", _qualification),
    Check("correctness receipts", "each --require-gate receipt: PASS at that commit, its artifacts", _receipts),
    Check("artifacts on hosts", "each receipt's artifacts against the roles' identity pins", _artifacts_on_hosts),
    Check("required gates", "the plan's gates.required against the receipts given", _required),
    Check("rehearsal", "the API rehearsal's receipt (--require-rehearsal)", _rehearsal),
    Check("budget", "the time estimate against [budget]", _budget),
)


def gate_summary(reading: GateReading) -> GateSummary:
    """What window.json keeps of the gates a window passed."""
    inputs = reading.inputs
    expected = inputs.expected_commit or reading.loaded.plan.window.expected_commit
    carried = reading.carried
    qualification = None
    if carried is not None and inputs.qualification is not None:
        how = carried.admission.get("foreign")  # an admission that was another tool's says how it was read
        qualification = QualificationRef(path=str(inputs.qualification), sha256=carried.sha256, admission=how)
    receipts = reading.receipts
    gates = [ReceiptRef(path=str(p), sha256=r.sha256) for p, r in zip(inputs.gates, receipts, strict=True)]
    rehearsal = reading.rehearsal
    return GateSummary(
        expected_commit=reading.repo_head if expected is not None else None,
        head=reading.head,
        qualification=qualification,
        gates=gates if inputs.qualification is not None or inputs.gates else None,
        artifacts_on_hosts=bind_to_hosts(receipts, identity_pins(reading.loaded, reading.mode)[0]) or None,
        rehearsal=ReceiptRef(path=str(inputs.rehearsal), sha256=rehearsal.sha256)
        if rehearsal and inputs.rehearsal
        else None,
        budget=budget_estimate(reading.estimate),
    )


def run_gates(
    loaded: LoadedPlan, mode_name: str, mode: Mode, inputs: GateInputs, output_dir: Path, archive_starts: int = 0
) -> GateSummary:
    """Every gate in order (:data:`GATES`), then what window.json keeps of them."""
    reading = GateReading(loaded, mode_name, mode, inputs, output_dir, archive_starts)
    run_plain(GATES, reading)
    return gate_summary(reading)


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
