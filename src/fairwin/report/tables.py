"""Terminal tables for the commands that are not a window: rules, audits, the archive, budget history."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from fairwin.archive import ArchiveKey
from fairwin.decision import DEFAULT_RULE, ArchiveNoise, AuditResult, RuleSpec
from fairwin.directory.gate_summary import BudgetRecord


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def rules_table(rules: Sequence[RuleSpec]) -> Table:
    table = Table(
        title="registered rules (`*` after an id: the default, for a plan that names none; looks 3*: the look after 3 "
        "starts is taken only with enough archived control starts, `rules show`)"
    )
    for column in ("id", "kind", "starts", "primary", "bar %", "confidence", "order", "sha256"):
        table.add_column(column)
    for rule in rules:
        table.add_row(
            rule.id + (" *" if rule.id == DEFAULT_RULE else ""),
            rule.kind,
            rule.starts_text(),
            rule.primary,
            f"{rule.bar_pct:g}",
            f"{rule.confidence:g}",
            rule.order,
            rule.sha256[:16],
        )
    return table


def audit_table(rule: RuleSpec, null: AuditResult, powered: AuditResult | None, effect_pct: float | None) -> Table:
    """A rule's simulated error rates under no change, and its power at ``effect_pct`` when given."""
    table = Table(title=f"{rule.id}: error rates by simulation ({null.trials} trials, seed {null.seed})")
    table.add_column("rate")
    table.add_column("value", justify="right")
    table.add_row("false WIN (no change)", f"{100 * (null.false_win or 0):.2f} %")
    table.add_row("false LOSS (no change)", f"{100 * (null.false_loss or 0):.2f} %")
    for guard, rate in null.guard_failure_rates.items():
        table.add_row(f"  guard {guard} fails (no change)", f"{100 * rate:.2f} %")
    for verdict, rate in null.rates.items():
        table.add_row(f"  {verdict} (no change)", f"{100 * rate:.2f} %")
    table.add_row("starts used (no change): mean / median / 90th pct", _starts(null))
    if powered is not None:
        table.add_row(f"power: WIN at a true {effect_pct:+g} %", f"{100 * (powered.power or 0):.2f} %")
        table.add_row(f"starts used at {effect_pct:+g} %: mean / median / 90th pct", _starts(powered))
    table.add_row("Monte Carlo error (1 s.e., worst case)", f"{100 * null.mc_error:.2f} points")
    return table


def beside_table(rows: Sequence[tuple[RuleSpec, AuditResult, AuditResult | None]], effect_pct: float | None) -> Table:
    """A sequential rule beside the fixed rules that ask its question, at the same noise: rates and starts."""
    table = Table(title="beside the fixed rules, at the same noise")
    columns = ["rule", "starts", "false WIN", "false LOSS", "starts used (no change)"]
    if effect_pct:
        columns += [f"WIN at {effect_pct:+g} %", f"starts used at {effect_pct:+g} %"]
    for column in columns:
        # A rule's id is never cut: the other columns wrap around it in a narrow terminal.
        widest = max(len(rule.id) for rule, _, _ in rows) if column == "rule" else None
        table.add_column(column, justify="left" if column in ("rule", "starts") else "right", min_width=widest)
    for rule, null, powered in rows:
        cells = [
            rule.id,
            rule.starts_text(),
            f"{100 * (null.false_win or 0):.2f} %",
            f"{100 * (null.false_loss or 0):.2f} %",
            _starts(null),
        ]
        if powered is not None:
            cells += [f"{100 * (powered.power or 0):.2f} %", _starts(powered)]
        table.add_row(*cells)
    return table


def _starts(found: AuditResult) -> str:
    if found.starts_mean is None:
        return "not recorded"
    return f"{found.starts_mean:.2f} / {found.starts_median:g} / {found.starts_p90:g} of {found.max_starts}"


def archive_groups_table(
    location: str, found: Sequence[tuple[ArchiveKey, Sequence[object], Sequence[ArchiveNoise], str | None]]
) -> list[Table]:
    """One table per archive key: its control starts' spread of every metric (with whether a plan's windows
    would count them, and why not, where a plan was given)."""
    tables = []
    for key, rows, results, verdict in found:
        caps = (
            "not recorded"
            if key.clock_caps_mhz is None
            else ", ".join(
                f"{host} {cap:g} MHz" if cap is not None else f"{host} unknown" for host, cap in key.clock_caps_mhz
            )
            or "none observed"
        )
        one_cap = f"{key.clock_cap_mhz:g} MHz" if key.clock_cap_mhz is not None else "none"
        gpus = f"{key.gpu_count} x {key.gpu_model}" if key.gpu_model else "no GPU observed"
        title = (
            f"{location}: cell {key.cell}, role {key.role}, mode {key.mode}, "
            f"{f'production {key.production_commit}' if key.production_commit else 'no production declared'}\n"
            f"prompt {key.prompt_tokens} / max {key.max_tokens} tokens, concurrency {key.concurrency}, "
            f"temperature {key.temperature}; hosts {', '.join(key.hosts or ()) or 'unknown'}; {gpus}; "
            f"cap {one_cap} (by host: {caps}); {len(rows)} control starts" + (f"\n{verdict}" if verdict else "")
        )
        table = Table(title=title)
        for column in ("metric", "starts", "windows", "day-to-day cv %", "repeat cv %", "range %"):
            table.add_column(column, justify="left" if column == "metric" else "right")
        for r in results:
            table.add_row(
                r.metric, str(r.starts), str(r.windows), _pct(r.launch_cv_pct), _pct(r.repeat_cv_pct), _pct(r.range_pct)
            )
        tables.append(table)
    return tables


def budget_table(directory: Path, history: Sequence[tuple[str, BudgetRecord]]) -> Table:
    table = Table(title=f"budget history in {directory}")
    for column in ("window", "estimated min", "actual min", "actual / estimated"):
        table.add_column(column, justify="left" if column == "window" else "right")
    for window_id, record in history:
        estimated, actual = record.estimate.measurement_end_s / 60, record.measured_s / 60
        table.add_row(window_id, f"{estimated:.2f}", f"{actual:.2f}", f"{actual / estimated:.2f}")
    return table
