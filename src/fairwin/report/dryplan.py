"""The dry plan, as text: what a window will do, before it does anything."""

from __future__ import annotations

from fairwin.decision import RuleSpec
from fairwin.gates.budget import estimate, stream_seconds
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.models import Mode
from fairwin.plan.schedule import starts_for, waves_for


def render_dry_plan(loaded: LoadedPlan, mode_name: str, mode: Mode, rule: RuleSpec) -> str:
    plan = loaded.plan
    lines = [
        f"plan {loaded.path} (sha256 {loaded.sha256})",
        f"mode {mode_name}: control {mode.control}, candidate {mode.candidate}; rule {rule.id}",
        "",
        "starts, in order (each: launch, health, 1 warm-up stream, every cell's waves, stop):",
    ]
    for start in starts_for(mode):
        role = plan.roles[start.role]
        lines.append(f"  {start.name}  {start.kind:<9}  role {start.role}: {' '.join(role.argv)}")
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
    budget = plan.budget
    est = estimate(loaded)
    lines += [
        "",
        "estimated duration (assumed costs from [budget]; not yet calibrated):",
        f"  per start: {budget.startup_s:g} s start + {budget.stop_s:g} s stop + "
        f"{est.waves_per_start} waves / {est.streams_per_start} streams "
        f"at {budget.decode_ms_per_token:g} ms/token decode, {budget.prefill_ms_per_token:g} ms/token prefill",
    ]
    for cell_name, cell in plan.cells.items():
        lines.append(f"  one {cell_name} stream: {stream_seconds(loaded, cell.prompt_tokens, cell.max_tokens):.1f} s")
    fits = "fits" if est.total_min <= budget.limit_min else "EXCEEDS"
    lines.append(
        f"  window: {est.starts} starts x {est.per_start_s / 60:.1f} min = {est.total_min:.1f} min "
        f"({fits} the {budget.limit_min:g} min limit)"
    )
    return "\n".join(lines)
