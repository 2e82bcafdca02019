"""The dry plan, as text: what a window will do, before it does anything."""

from __future__ import annotations

from fairwin.decision import RuleSpec
from fairwin.gates.budget import render_table
from fairwin.gates.estimate import TimeEstimate
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.modes import Mode
from fairwin.plan.schedule import waves_for, window_starts


def _starts(rule: RuleSpec, max_starts: int | None) -> str:
    if rule.rounds:
        return rule.starts_text()
    if not rule.looks:
        return f"{rule.start_count} starts"
    capped = max_starts is not None and max_starts < rule.start_count
    most = f"{max_starts} (budget.max_starts; the rule's {rule.start_count})" if capped else f"{rule.start_count}"
    return (
        f"looks after {', '.join(str(k) for k in rule.looks)} starts, the first only with "
        f"{rule.first_look_archive_starts} archived control starts; at most {most}"
    )


def render_dry_plan(
    loaded: LoadedPlan, mode_name: str, mode: Mode, rule: RuleSpec, estimates: list[TimeEstimate]
) -> str:
    plan = loaded.plan
    order = (
        "orders drawn per round (one seed's shown; a dropped candidate's turns are skipped)"
        if rule.rounds
        else f"kinds alternating, {'first kind drawn at random' if rule.order == 'random' else 'control first'}"
    )
    lines = [
        f"plan {loaded.path} (sha256 {loaded.sha256})",
        f"mode {mode_name}: control {mode.control}, {'candidates' if mode.many else 'candidate'} "
        f"{', '.join(mode.arms)}; rule {rule.id} ({_starts(rule, plan.budget.max_starts)}, {order})",
        "",
        "starts, in order (each: launch, health, 1 warm-up stream, every cell's waves, stop):",
    ]
    for start in window_starts(mode, rule)[: plan.budget.max_starts]:
        role = plan.roles[start.role]
        in_round = f"  round {start.round}" if start.round is not None else ""
        lines.append(f"  {start.name}  {start.kind:<9}  role {start.role}{in_round}: {' '.join(role.argv)}")
    for cell_name, cell in plan.cells.items():
        lines += [
            "",
            f"cell {cell_name}{'' if cell.decision else ' (reported, not deciding)'}: {cell.endpoint}, "
            f"~{cell.prompt_tokens} prompt tokens, max_tokens {cell.max_tokens} (ignore_eos), "
            f"concurrency {cell.concurrency}, temperature {cell.temperature:g}, top_p {cell.top_p:g}, "
            f"{cell.streams_per_wave} streams per wave",
        ]
        for wave in waves_for(loaded, cell_name):
            ids = ", ".join(p.id for p in wave.prompts)
            lines.append(f"  wave {wave.index:>2}  repeat {wave.repeat}  {wave.family:<10} seed {wave.seed}  [{ids}]")
    chosen = next(e for e in estimates if e.mode == mode_name)
    budget = plan.budget
    lines += [
        "",
        f"estimated duration (limits: dry bound {budget.limit_min:g} min, measurement end "
        f"{budget.measurement_limit_min:g} min):",
        "",
    ]
    lines += render_table(estimates, loaded)
    lines += ["", f"per start in {mode_name} ({chosen.waves_per_start} waves each):"]
    for cost in chosen.starts:
        lines.append(
            f"  {cost.start} role {cost.role}: start {cost.startup_s:.1f} s, warm-up {cost.warmup_s:.1f} s, "
            f"waves {cost.waves_s:.1f} s, stop {cost.stop_s:.1f} s"
        )
    lines += ["", "where the costs come from:"] + [f"  {what}: {how}" for what, how in chosen.sources.items()]
    return "\n".join(lines)
