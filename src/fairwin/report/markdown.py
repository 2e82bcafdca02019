"""summary.md: the window's verdict, per-cell decisions and per-repeat rows, for people."""

from __future__ import annotations

from collections.abc import Sequence

from fairwin.decision import Decision
from fairwin.metrics.pool import PooledRow
from fairwin.plan.loading import LoadedPlan
from fairwin.window.layout import WindowDir


def _num(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def decision_table(decision: Decision) -> list[str]:
    lines = [
        "| cell | decides | verdict | control | candidate | point % | CI % |",
        "|---|---|---|---|---|---|---|",
    ]
    for cell in decision.cells:
        p = cell.primary
        if p is None:
            lines.append(f"| {cell.cell} | {cell.decides} | {cell.verdict} | n/a | n/a | n/a | n/a |")
            continue
        lines.append(
            f"| {cell.cell} | {cell.decides} | **{cell.verdict}** | {p.control_mean:.2f} | {p.candidate_mean:.2f} "
            f"| {p.point_pct:+.2f} | [{p.ci_low_pct:+.2f}, {p.ci_high_pct:+.2f}] |"
        )
    return lines


def rows_table(rows: Sequence[PooledRow]) -> list[str]:
    lines = [
        "| start | role | cell | repeat | rate tok/s | accepted/round | ms/round | TTFT s | client decode tok/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r.cell, r.repeat, r.start)):
        lines.append(
            f"| {r.start} | {r.role} | {r.cell} | {r.repeat} | {r.pooled_rate_tps:.2f} | "
            f"{r.accepted_per_round:.3f} | {r.ms_per_round:.3f} | {r.ttft_s:.4f} | {_num(r.decode_tps)} |"
        )
    return lines


def fidelity_table(rows: Sequence[PooledRow]) -> list[str]:
    """Client-observed decode rate next to the server's for the same streams."""
    lines = [
        "| start | cell | server rate tok/s | client decode tok/s | client / server |",
        "|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str], list[PooledRow]] = {}
    for r in rows:
        groups.setdefault((r.start, r.cell), []).append(r)
    for (start, cell), group in sorted(groups.items()):
        # Ratios of sums over the start's repeats, like the pooling itself.
        server = sum(r.decode_steps + r.accepted_tokens for r in group) / sum(r.decode_s for r in group)
        client_s = sum(r.client_decode_s for r in group)
        client = sum(r.client_decode_tokens for r in group) / client_s if client_s > 0 else None
        ratio = None if client is None else client / server
        lines.append(f"| {start} | {cell} | {server:.2f} | {_num(client)} | {_num(ratio, 3)} |")
    return lines


def render_summary(loaded: LoadedPlan, window: WindowDir, decision: Decision, rows: Sequence[PooledRow]) -> str:
    rule = decision.rule
    parts = [
        f"# fairwin window {window.window_id}",
        "",
        f"**Verdict: {decision.verdict}** ({'; '.join(decision.reasons)})",
        "",
        f"- mode: `{decision.mode}`",
        f"- plan: `{loaded.path}` (sha256 `{loaded.sha256}`)",
        f"- rule: `{rule.id}` (sha256 `{decision.rule_sha256}`): primary `{rule.primary}`, bar {rule.bar_pct:g} %, "
        f"{rule.confidence:.0%} paired-t interval, paired by repeat (control = mean of s1 and s3)",
        "",
        "## Decision by cell",
        "",
        *decision_table(decision),
        "",
        "## Pooled rows (one per start, cell and repeat)",
        "",
        *rows_table(rows),
        "",
        "## Fidelity: client-observed vs server decode rate",
        "",
        "The server's rate is (rounds + accepted) / decode seconds from its own counters; the client's is "
        "the sum of (tokens - 1) over the sum of (last token - first token) for the same streams. A ratio "
        "well above 1 means the client fell behind and read tokens in bursts (its clock, not the server's, "
        "is off); well below 1 means delivery overhead the server cannot see.",
        "",
        *fidelity_table(rows),
        "",
    ]
    return "\n".join(parts)
