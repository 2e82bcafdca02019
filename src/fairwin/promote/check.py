"""``fairwin promote check``: ALLOWED only when everything a window's WIN rests on holds, else every reason.

Each check reads what the window recorded and, for the receipts it was given, the
receipts themselves again (sealed, PASS, at the window's commit, the digest the window
recorded). Every failing check adds one line; none stops the others, so a refusal
lists everything that must be fixed. The result is a sealed ``fairwin.promotion/1``
receipt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from fairwin.decision import Decision
from fairwin.directory.gate_summary import GateSummary
from fairwin.directory.layout import WindowDir
from fairwin.directory.manifest import WindowManifest
from fairwin.directory.status import WindowStatus
from fairwin.errors import FairwinError
from fairwin.files import sha256_file
from fairwin.formats import PROMOTION, RecordFormat
from fairwin.gates.correctness import require_gate
from fairwin.gates.qualify import require_carry
from fairwin.gates.receipt import Receipt, read_receipt, write_receipt
from fairwin.gates.rehearsal import RehearsalRecord
from fairwin.plan.checks import Qualification
from fairwin.plan.loading import parse_window_plan
from fairwin.promote.policy import PromotionPolicy
from fairwin.records import read_record
from fairwin.verdict.stored import completed_decision


class CheckOutcome(BaseModel):
    """One check of the promotion gate, and whether it held."""

    model_config = ConfigDict(extra="forbid")

    check: str
    ok: bool


class PromotionRecord(Receipt):
    """``fairwin.promotion/1`` (sealed): ALLOWED, or REFUSED with every reason, and each check's outcome."""

    record_format: ClassVar[RecordFormat] = PROMOTION
    model_config = ConfigDict(extra="forbid")

    format: Literal["fairwin.promotion/1"] = "fairwin.promotion/1"
    verdict: Literal["ALLOWED", "REFUSED"]
    reasons: list[str]
    checks: list[CheckOutcome]
    accepted: list[str] = Field(default_factory=list)  # what went unjudged and the policy accepted, named
    window_id: str
    window_path: str
    candidate: str | None = None  # the role promoted: the window's candidate, or a many-arm window's best WIN
    decision_sha256: str | None
    commit: str | None
    policy_path: str
    policy_sha256: str
    created_unix: float


@dataclass
class Evidence:
    """What the window recorded, read once."""

    path: Path
    status: WindowStatus
    manifest: WindowManifest
    decision: Decision | None

    @property
    def gates(self) -> GateSummary | None:
        return self.manifest.gates

    @property
    def candidate(self) -> str | None:
        """The role promoted: a many-arm window's best WIN (its cells are the decision's), else its candidate."""
        arms = self.decision.arms if self.decision is not None else None
        return arms.ranking.best if arms is not None else self.manifest.candidate_role

    @property
    def commit(self) -> str | None:
        """The commit under test: the one the gates bound the window to, else the plan's work tree's."""
        head = self.gates.head if self.gates is not None else None
        return head or self.manifest.commit


def _decided(found: Evidence, policy: PromotionPolicy) -> list[str]:
    decision = found.decision
    if decision is None:
        return []  # the window is not complete: said once, by _complete
    reasons = [] if decision.verdict == "WIN" else [f"the verdict is {decision.verdict}, not WIN"]
    accepted = {(rule.id, rule.sha256) for rule in policy.rules}
    if (decision.rule_id, decision.rule_sha256) not in accepted:
        reasons.append(
            f"rule {decision.rule_id} (sha256 {decision.rule_sha256[:16]}...) is not one the policy "
            f"accepts: {', '.join(f'{r.id} ({r.sha256[:16]}...)' for r in policy.rules)}"
        )
    if decision.mode != policy.mode:
        reasons.append(f"the window ran in mode {decision.mode}; the policy requires {policy.mode}")
    return reasons


def _qualification_rules(found: Evidence) -> Qualification:
    """The [qualification] of the plan the window ran (its copy): what the carry must have held."""
    plan = parse_window_plan(WindowDir.at(found.path))
    return plan.qualification


def _qualification_and_gates(found: Evidence, policy: PromotionPolicy) -> list[str]:
    """The carry and every gate receipt, read again: sealed, at the window's commit, bound to each other."""
    reasons: list[str] = []
    head, gates = found.commit, found.gates
    recorded = gates.qualification if gates is not None else None
    artifacts: dict[str, str] | None = None
    if recorded is None:
        if policy.require_qualification:
            reasons.append("no qualification was given to the window (run it with --qualification CARRIED.json)")
    elif head is None:
        reasons.append("the window recorded no git commit, so its qualification cannot be bound to it")
    else:
        try:
            carried = require_carry(Path(recorded.path), head, _qualification_rules(found))
            artifacts = carried.artifacts
            if carried.sha256 != recorded.sha256:
                reasons.append(f"qualification {recorded.path} is not the receipt the window was given")
        except FairwinError as exc:
            reasons.append(f"qualification: {exc}")
    passed = set()
    for gate in (gates.gates if gates is not None else None) or []:
        try:
            receipt = require_gate(Path(gate.path), head or "", artifacts)
        except FairwinError as exc:
            reasons.append(f"gate receipt: {exc}")
            continue
        if receipt.sha256 != gate.sha256:
            reasons.append(f"gate receipt {gate.path} is not the one the window was given")
        else:
            passed.add(receipt.name)
    reasons += [
        f"gate {name}: no PASS receipt was given to the window (--require-gate)"
        for name in policy.require_gates
        if name not in passed
    ]
    return reasons


def _rehearsal(found: Evidence, policy: PromotionPolicy) -> list[str]:
    recorded = found.gates.rehearsal if found.gates is not None else None
    if recorded is None:
        return ["no rehearsal was given to the window (--require-rehearsal DIR)"] if policy.require_rehearsal else []
    try:
        document = read_receipt(Path(recorded.path) / "rehearsal.json", RehearsalRecord)
    except FairwinError as exc:
        return [f"rehearsal: {exc}"]
    reasons = [] if document.verdict == "PASS" else [f"rehearsal {recorded.path} is {document.verdict}"]
    if document.plan_sha256 != found.manifest.plan_sha256:
        reasons.append(f"rehearsal {recorded.path} was made for another plan (sha256 differs from the window's)")
    if document.sha256 != recorded.sha256:
        reasons.append(f"rehearsal {recorded.path} is not the receipt the window was given")
    return reasons


def _metrics_and_validity(found: Evidence, policy: PromotionPolicy) -> list[str]:
    if found.decision is None:
        return []
    reasons = []
    for cell in (c for c in found.decision.cells if c.decides):
        measured = {r.metric for r in [cell.primary, *cell.reported] if r is not None and r.estimate is not None}
        measured |= {g.metric for g in cell.guards if g.failed is not None}
        reasons += [
            f"{cell.cell}: {metric} was not recorded" for metric in policy.require_metrics if metric not in measured
        ]
        reasons += [
            f"{cell.cell}: guard {g.metric} {'FAILED' if g.failed else 'was not judged'}: {g.detail}"
            for g in cell.guards
            if g.failed or (g.failed is None and g.metric not in policy.accept_unjudged_guards)
        ]
        if policy.require_observed_clock_caps and not (cell.validity is not None and cell.validity.observed):
            reasons.append(f"{cell.cell}: its starts' clock caps were not observed (no GPU telemetry)")
    return reasons


def _greedy(found: Evidence, policy: PromotionPolicy) -> list[str]:
    if found.decision is None:
        return []
    greedy = found.decision.greedy
    if greedy is None:
        return ["greedy diagnostics did not run ([diagnostics.greedy] in the plan)"] if policy.require_greedy else []
    return [
        f"real greedy divergence: {d.start} against {d.reference}, {d.cell} {d.prompt} at position {d.position}: "
        f"{d.expected!r} expected, {d.got!r} written"
        for d in greedy.real
    ]


def _restored(found: Evidence, policy: PromotionPolicy) -> list[str]:
    if not policy.require_restored:
        return []
    restore = found.status.restore
    if restore is None:
        return ["the window held no production, so none was restored and watched"]
    if restore.state == "CHAINED":
        return _chain_restored(found)
    if not restore.restored:
        why = f": {restore.reason}" if restore.reason else ""
        return [f"production was not restored and watched: {restore.state}{why}"]
    return []


def _chain_restored(found: Evidence) -> list[str]:
    """A window that left production down for its chain (the runbook's chained production-policy windows) counts
    as restored once the chain's last window, beside it, restored production and the watch held."""
    chain_id = found.status.chain_id
    if chain_id is None:
        return ["production was left down for a chain (CHAINED) that the window's status does not name"]
    for other in sorted(found.path.parent.glob("*/status.json")):
        try:
            status = read_record(other, WindowStatus)
        except FairwinError:
            continue
        if status.chain_id == chain_id and status.chain is not None and status.chain.end == "ENDED":
            if status.restore is not None and status.restore.restored:
                return []
            return [f"chain {chain_id}'s last window {other.parent.name} did not restore production"]
    return [
        f"production was left down for chain {chain_id} (CHAINED), and no window beside it has ended the chain "
        "with production restored yet"
    ]


def _accepted(found: Evidence, policy: PromotionPolicy) -> list[str]:
    """The guards that went unjudged and the policy accepts so, each with why it went unjudged."""
    cells = [c for c in found.decision.cells if c.decides] if found.decision is not None else []
    return [
        f"{cell.cell}: guard {g.metric} not judged ({g.detail}); accepted by accept_unjudged_guards"
        for cell in cells
        for g in cell.guards
        if g.failed is None and g.metric in policy.accept_unjudged_guards
    ]


CHECKS: list[tuple[str, Callable[[Evidence, PromotionPolicy], list[str]]]] = [
    ("verdict, rule and mode", _decided),
    ("qualification and gates", _qualification_and_gates),
    ("rehearsal", _rehearsal),
    ("metrics, guards and validity", _metrics_and_validity),
    ("greedy diagnostics", _greedy),
    ("production restored", _restored),
]


def gather(files: WindowDir) -> tuple[Evidence, list[str]]:
    """The window's records, and why it cannot be promoted at all (not complete, its decision unsealed)."""
    status = read_record(files.status, WindowStatus)
    manifest = read_record(files.manifest, WindowManifest)
    decision, reasons = None, []
    if status.state != "complete":
        reasons.append(f"the window is {status.state}, not complete")
    else:
        try:
            decision = completed_decision(files)
        except FairwinError as exc:
            reasons.append(f"its decision cannot be trusted: {exc}")
    sealed = decision.inputs if decision is not None else None
    if sealed is not None and sha256_file(files.manifest) != sealed.manifest_sha256:
        reasons.append(f"{files.manifest} changed since the decision sealed it")
    return Evidence(files.path, status, manifest, decision), reasons


def check_promotion(
    window: WindowDir, policy: PromotionPolicy, policy_path: Path, policy_sha256: str, out: Path | None = None
) -> PromotionRecord:
    """Every check, then the sealed ``fairwin.promotion/1`` receipt (written to ``out``, default
    WINDOW/promotion.json); its ``verdict`` is ALLOWED or REFUSED with every reason."""
    found, reasons = gather(window)
    checked = []
    for name, check in CHECKS:
        failed = check(found, policy)
        checked.append(CheckOutcome(check=name, ok=not failed))
        reasons += failed
    document = PromotionRecord(
        verdict="REFUSED" if reasons else "ALLOWED",
        reasons=reasons,
        checks=checked,
        accepted=_accepted(found, policy),
        window_id=found.manifest.window_id,
        window_path=str(window.path),
        candidate=found.candidate if not reasons else None,
        decision_sha256=found.status.decision_sha256,
        commit=found.commit,
        policy_path=str(policy_path),
        policy_sha256=policy_sha256,
        created_unix=time.time(),
    )
    return write_receipt(out if out is not None else window.promotion, document)
