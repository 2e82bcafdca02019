"""Everything a window can refuse, or warn about, before a directory is made or a server started.

The runtime declarations (derived environments, speculative configs), CPU lists, the
rule and whether the server profile gives the counters it needs; then the power and
error-rate warnings from the control archive's noise, and the draw of the order.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from fairwin.archive import Snapshot, open_archive
from fairwin.archive.archive_row import PlannedKey
from fairwin.archive.window_rows import archive_location, planned_match, window_noise
from fairwin.decision import RULES, ArchiveNoise, RuleSpec
from fairwin.decision.sequential import fewest_archived_starts
from fairwin.errors import ArchiveError, PlanError, RuntimeCheckError
from fairwin.gates.estimate import TimeEstimate
from fairwin.gates.power import audit_trials, error_rate_warnings, expected_starts, power_warnings
from fairwin.gates.refusal import refuse
from fairwin.launch.scheduling import check_cpus_exist
from fairwin.launch.spec import LaunchSpec, make_spec
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.models import Plan
from fairwin.plan.modes import Mode
from fairwin.plan.schedule import resolve_mode
from fairwin.plan.site import Site
from fairwin.production.runtime_checks import check_declared_env, check_speculative
from fairwin.profiles import PROFILES, ServerProfile
from fairwin.rows import Order
from fairwin.telemetry.cap import planned_cap
from fairwin.transport import api_headers


@dataclass(frozen=True)
class Preflight:
    mode_name: str
    mode: Mode
    rule: RuleSpec


def preflight(loaded: LoadedPlan, mode_name: str) -> Preflight:
    """Everything that can be refused before a directory is made or a server started."""
    mode = resolve_mode(loaded, mode_name)
    plan = loaded.plan
    check_cpus_exist("window.client_cpus", plan.window.client_cpus)
    for role in sorted(mode.roles):
        spec = make_spec(role, plan.roles, loaded.base_dir)  # env files and {env:NAME} must resolve
        refuse("runtime declarations", _declaration_problems(spec, plan))
        check_cpus_exist(f"roles.{role}.cpus", plan.roles[role].cpus)
        api_headers(plan.roles[role].api_key_env, f"roles.{role}.api_key_env")  # its key must be there to send
    rule = plan.rule_for(mode_name, mode)
    if plan.window.counters != "auto":  # auto: checked at the first start, once its server's /metrics is read
        check_counters(PROFILES[plan.window.counters], rule, f'window.counters = "{plan.window.counters}"')
    greedy = plan.diagnostics.greedy
    if greedy is not None and greedy.reference is not None and not loaded.resolve(greedy.reference).is_file():
        raise PlanError(
            f"diagnostics.greedy.reference {loaded.resolve(greedy.reference)} does not exist; "
            "point it at a stored greedy.jsonl or remove the key"
        )
    return Preflight(mode_name=mode_name, mode=mode, rule=rule)


def _declaration_problems(spec: LaunchSpec, plan: Plan) -> list[str]:
    """A derived role's environment against its base's, and the speculative config its arguments state against
    the declared one: what refuses before anything starts, where each start checks them again."""
    try:
        check_declared_env(spec)
        check_speculative(
            spec.role_name, plan.roles[spec.role_name].speculative, spec.argv, plan.runtime.standard_verification
        )
    except RuntimeCheckError as exc:
        return [str(exc)]
    return []


def check_counters(profile: ServerProfile, rule: RuleSpec, why: str) -> None:
    """A rule reading server metrics needs a profile that reads the server's counters (``why``: how the profile
    was chosen, as the refusal says it)."""
    if profile.reads_counters or not rule.server_metrics:
        return
    fitting = sorted(r.id for r in RULES.values() if not r.server_metrics)
    raise PlanError(
        f"{why} reads no server counters, but rule {rule.id} decides on "
        f"{', '.join(rule.server_metrics)}, which come from them; set window.rule to one whose metrics the "
        f"client measures ({', '.join(fitting)})"
    )


def planned_keys(site: Site, mode_name: str | None, cap: float | None) -> dict[str, PlannedKey]:
    """Each cell's archive match (``cap``: production's clock cap), which the gates, the looks and the decision
    all count rows with; any mode's cells when none is named."""
    mode = site.plan.all_modes().get(mode_name) if mode_name is not None else None
    if mode is None:
        return {cell: PlannedKey(cell=cell) for cell in site.plan.cells}
    assert mode_name is not None
    return {cell: planned_match(site, mode_name, mode.control, cell, cap) for cell in site.plan.cells}


def read_plan_archive(site: Site, out: Path) -> Snapshot:
    """The archive a run of this plan reads (``out``: its output directory), read once."""
    return open_archive(archive_location(site, out)).snapshot()


def _deciding_noise(
    site: Site, rule: RuleSpec, snapshot: Snapshot, mode_name: str | None, cap: float | None
) -> tuple[list[ArchiveNoise], list[str]]:
    """The archive's noise for the plan's cells (``cap``: production's clock cap), and the cells that decide."""
    noise = window_noise(snapshot, planned_keys(site, mode_name, cap), rule)
    return noise, [name for name, cell in site.plan.cells.items() if cell.decision]


def first_look_archive(site: Site, rule: RuleSpec, snapshot: Snapshot, mode_name: str | None, cap: float | None) -> int:
    """The fewest archived control starts behind a deciding cell's primary, matched as the looks will match them
    (``cap``: production's clock cap): what a sequential rule's first look rests on."""
    noise, deciding = _deciding_noise(site, rule, snapshot, mode_name, cap)
    return fewest_archived_starts(noise, deciding, rule.primary)


def preflight_power(site: Site, rule: RuleSpec, snapshot: Snapshot, mode_name: str, cap: float | None) -> list[str]:
    """Warnings (never refusals) when the archive's noise makes the bar undetectable with this plan."""
    noise, deciding = _deciding_noise(site, rule, snapshot, mode_name, cap)
    return power_warnings(rule, site.plan.window.repeats, noise, deciding)


def error_rate_check(site: Site, rule: RuleSpec, out: Path) -> list[str]:
    """Warnings when the plan's rule misses its error-rate targets at the control archive's noise (each mode's)."""
    try:
        snapshot = read_plan_archive(site, out)
    except ArchiveError as exc:
        return [f"{exc}; the error rates were not checked against the archive"]
    found: list[str] = []
    cap = planned_cap(site)
    for mode_name in site.plan.all_modes() or [None]:
        noise, deciding = _deciding_noise(site, rule, snapshot, mode_name, cap)
        found += [w for w in error_rate_warnings(rule, site.plan.window.repeats, noise, deciding) if w not in found]
    return found


def power_check(site: Site, rule: RuleSpec, mode_name: str, out: Path) -> list[str]:
    """The power warnings a run of this plan and mode would print, without running it."""
    try:
        snapshot = read_plan_archive(site, out)
    except ArchiveError as exc:
        return [f"{exc}; the power was not checked against the archive"]
    return preflight_power(site, rule, snapshot, mode_name, planned_cap(site))


def draw_round_seed() -> int:
    """A many-arm window's seed for its rounds' orders, from the OS: recorded in window.json."""
    return secrets.randbits(31)


def draw_order(rule: RuleSpec) -> Order:
    """control-first unless the rule asks for a random order; then a fair coin from the OS."""
    if rule.order == "control-first":
        return "control-first"
    orders: tuple[Order, Order] = ("control-first", "candidate-first")
    return secrets.choice(orders)


def hold_lines(site: Site, rule: RuleSpec, mode_name: str, found: TimeEstimate, snapshot: Snapshot) -> list[str]:
    """What the window holds production for under a sequential rule: the first look's, the expected (at the
    archive's noise, no change, from the rule's audit) and the maximum measurement time."""
    if not rule.looks:
        return []
    noise, deciding = _deciding_noise(site, rule, snapshot, mode_name, planned_cap(site))
    mean = expected_starts(rule, site.plan.window.repeats, noise, deciding)
    first, most = found.first_look or len(found.starts), len(found.starts)  # most: max_starts may cap the rule's
    mean = None if mean is None else min(mean, most)  # a budget of fewer starts ends the window there at the latest
    per_start = (found.end_after(most) - found.end_after(first)) / max(most - first, 1)
    expected = (
        f"about {mean:.1f} starts ({(found.end_after(first) + (mean - first) * per_start) / 60:.1f} min) when "
        f"nothing changed, at the archive's noise ({audit_trials()} simulated windows)"
        if mean is not None
        else "not known: no archived control starts of every deciding cell"
    )
    return [
        f"hold under {rule.id} (looks after {', '.join(str(k) for k in rule.looks_taken(found.archive_starts))} "
        "starts):",
        f"  first look: after {first} starts, measurement ends at {found.end_after(first) / 60:.1f} min",
        f"  expected:   {expected}",
        f"  maximum:    {most} starts, measurement ends at {found.end_after(most) / 60:.1f} min",
    ]
