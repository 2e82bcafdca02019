"""summary.md: the window's verdict, per-cell decisions, noise, error rates and per-repeat rows, for people."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from fairwin.decision import CellDecision, Decision, MetricResult
from fairwin.decision.decide import guard_reason
from fairwin.directory.start_receipt import StartTelemetry
from fairwin.report.arms_section import arms_section
from fairwin.report.decision_table import NO_VALUE, interval, markdown_table
from fairwin.report.error_rates import audited_rates
from fairwin.rows import PooledRow


def _num(value: float | None, digits: int = 2) -> str:
    return NO_VALUE if value is None else f"{value:.{digits}f}"


def _metric_cell(result: MetricResult | None) -> str:
    """A reported or checklist metric: its verdict and interval, or ``n/a`` when the rule has none."""
    return NO_VALUE if result is None else f"{result.verdict} {interval(result)}"


def cell_details(cell: CellDecision) -> list[str]:
    lines = [f"### {cell.cell}: {cell.verdict}", ""]
    printed_below = {guard_reason(g) for g in cell.guards if g.failed}  # each guard has its own line
    lines += [f"- {reason}" for reason in cell.reasons if reason not in printed_below]
    for guard in cell.guards:
        state = "FAILED" if guard.failed else "passed" if guard.failed is False else "not judged"
        lines.append(f"- guard `{guard.metric}` {state}: {guard.detail}")
    for result in cell.reported:
        lines.append(f"- reported `{result.metric}` (never decides): {_metric_cell(result)}")
    if cell.checklist_literal is not None:
        literal = cell.checklist_literal
        lines.append(f"- checklist_literal (`{literal.metric}` as the primary): {_metric_cell(literal)}")
    if cell.validity is not None:
        caps = cell.validity.clock_caps_mhz
        lines.append(
            "- validity: "
            + (
                "clock caps " + ", ".join(f"{s} {_num(c, 0)}" for s, c in caps.items())
                if cell.validity.observed
                else "clock caps not observed (no GPU telemetry)"
            )
        )
    if cell.noise is not None:
        spread = ", ".join(f"{s:.2f}" for s in cell.noise.off_off_spread_pct)
        archive = cell.noise.archive
        day = NO_VALUE if archive is None or archive.launch_cv_pct is None else f"{archive.launch_cv_pct:.2f} %"
        lines.append(
            f"- noise next to the {cell.noise.bar_pct:g} % bar: in-window spread of the first kind's starts per repeat "
            f"[{spread}] %; "
            f"archive day-to-day spread {day}"
            + (
                f" over {archive.starts} control starts in {archive.windows} windows"
                if archive and archive.starts
                else ""
            )
        )
        lines += [f"- note: {note}" for note in cell.noise.notes]
        if archive is not None:
            lines += [f"- archive: {problem}" for problem in archive.problems]
    lines.append("")
    return lines


def rows_table(rows: Sequence[PooledRow]) -> list[str]:
    lines = [
        "| start | kind | role | cell | repeat | rate tok/s | accepted/round | ms/round | TTFT s "
        "| client decode tok/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r.cell, r.repeat, r.start)):
        lines.append(
            f"| {r.start} | {r.kind} | {r.role} | {r.cell} | {r.repeat} | {_num(r.pooled_rate_tps)} | "
            f"{_num(r.accepted_per_round, 3)} | {_num(r.ms_per_round, 3)} | {_num(r.ttft_s, 4)} | "
            f"{_num(r.decode_tps)} |"
        )
    return lines


def _fidelity_line(start: str, cell: str, group: Sequence[PooledRow]) -> str:
    # Ratios of sums over the start's repeats, like the pooling itself; no server rate when no counters were read.
    decode_s = [r.decode_s for r in group]
    server = (
        sum((r.decode_steps or 0.0) + (r.accepted_tokens or 0.0) for r in group) / sum(s for s in decode_s if s)
        if all(decode_s)
        else None
    )
    client_s = sum(r.client_decode_s for r in group)
    client = sum(r.client_decode_tokens for r in group) / client_s if client_s > 0 else None
    ratio = None if client is None or server is None else client / server
    own = [r.server_stream_decode_s for r in group if r.client_streams]
    own_ratio = sum(o for o in own if o) / client_s if own and None not in own and client_s > 0 else None
    streams = sum(r.streams for r in group)
    kept_each = [r.client_streams for r in group]
    kept = sum(k for k in kept_each if k is not None) if None not in kept_each else None
    problems = [f"repeat {r.repeat}: {r.client_problem}" for r in group if r.client_problem]
    return (
        f"| {start} | {cell} | {NO_VALUE if kept is None else kept} of {streams} | {_num(server)} | "
        f"{_num(client)} | {_num(ratio, 3)} | {_num(own_ratio, 3)} | {'; '.join(problems) or NO_VALUE} |"
    )


def fidelity_table(rows: Sequence[PooledRow]) -> list[str]:
    """Client-observed decode rate next to the server's for the same streams, and what was not trusted."""
    lines = [
        "| start | cell | streams trusted | server rate tok/s | client decode tok/s | client / server counters "
        "| client / server per request | unobserved |",
        "|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str], list[PooledRow]] = {}
    for r in rows:
        groups.setdefault((r.start, r.cell), []).append(r)
    lines += [_fidelity_line(start, cell, group) for (start, cell), group in sorted(groups.items())]
    return lines


_SOURCE = {
    "server": "the server's own counters",
    "client": "fairwin's client",
}


def _measured_by(decision: Decision) -> str:
    """Who measured the primary, and which server profile the counters were pooled with."""
    if decision.counters is None:  # recorded before the profile was
        return _SOURCE[decision.primary_source]
    pooled = "not read" if decision.counters == "none" else f"pooled with the `{decision.counters}` profile"
    return f"{_SOURCE[decision.primary_source]} (the server's counters: {pooled})"


def render_summary(
    plan_path: Path,
    plan_sha256: str,
    decision: Decision,
    rows: Sequence[PooledRow],
    held: Sequence[str] = (),
    telemetry: Sequence[tuple[str, StartTelemetry]] = (),
) -> str:
    """The window's summary; ``held`` are lines about the hardware (production's restore, the chain),
    ``telemetry`` each start's GPU summary (start.json's ``telemetry``, by start)."""
    rule = decision.rule
    rates = audited_rates(decision)
    parts = [
        f"# fairwin window {decision.window_id}",
        "",
        f"**Verdict: {decision.verdict}** ({'; '.join(decision.reasons)})",
        "",
        f"- {rates}",
        *(f"- {line}" for line in held),
        f"- mode: `{decision.mode}`, "
        + ("rounds in the orders window.json's round_seed drew" if decision.arms else f"order: {decision.order}"),
        f"- plan: `{plan_path}` (sha256 `{plan_sha256}`)",
        f"- rule: `{rule.id}` (sha256 `{decision.rule_sha256}`): primary `{rule.primary}`, bar {rule.bar_pct:g} %, "
        f"{rule.confidence:.0%} interval; guards {', '.join(rule.guards) or 'none'}; "
        f"reported {', '.join(rule.reported) or 'none'}",
        f"- primary measured by: {_measured_by(decision)}",
        "",
        *looks_section(decision),
        *arms_section(decision),
        "## Decision by cell",
        "",
        *markdown_table(decision),
        "",
        *[line for cell in decision.cells for line in cell_details(cell)],
        "## Pooled rows (one per start, cell and repeat)",
        "",
        *rows_table(rows),
        "",
        "## Fidelity: client-observed vs server decode rate",
        "",
        "The server's rate is (rounds + accepted) / decode seconds from its own counters over every stream; "
        "the client's is the sum of (tokens - 1) over the sum of (last token - first token) over the streams "
        "whose client timing was trusted (docs/fidelity.md). *Per request* holds the client's decode time "
        "against the server's own decode time for exactly those streams, when the server reports it "
        "(vLLM: --enable-per-request-metrics); 1.000 is perfect. A repeat with too few trusted streams has "
        "no client metrics, and the decision says so.",
        "",
        *fidelity_table(rows),
        "",
        *telemetry_section(telemetry),
        *greedy_section(decision),
    ]
    return "\n".join(parts)


def looks_section(decision: Decision) -> list[str]:
    """A sequential window's looks, one line each: what each found, and how the window ended."""
    stopping = decision.sequential
    if stopping is None:
        return []
    lines = [
        "## Looks",
        "",
        f"The window {stopping.line(decision.verdict)}"
        + (f" ({stopping.stop_reason})" if stopping.stop_reason else "")
        + ".",
        "",
    ]
    for look in stopping.looks:
        found = "; ".join(
            f"{cell} {look.cells.get(cell, '?')} {point:+.2f} % [{low:+.2f}, {high:+.2f}]"
            for cell, (point, low, high) in look.primary.items()
        )
        lines.append(f"- after s{look.after} ({look.level:.2%} interval): **{look.verdict}**; {found or 'no estimate'}")
    saved = stopping.max_starts - stopping.starts_used
    if saved > 0:
        lines.append(f"- {saved} of {stopping.max_starts} starts of hold not spent")
    return [*lines, ""]


def telemetry_section(starts: Sequence[tuple[str, StartTelemetry]]) -> list[str]:
    """Per start: the cap it ran at, its SM clock (min, median, max over busy samples), its dial-backs."""
    if not starts:
        return []
    lines = [
        "## GPU telemetry",
        "",
        "| start | source | samples | cap MHz | SM MHz min / median / max | dial-backs |",
        "|---|---|---|---|---|---|",
    ]
    for name, start in starts:
        sm = start.sm_mhz
        clocks = f"{sm['min']:.0f} / {sm['median']:.0f} / {sm['max']:.0f}" if sm else NO_VALUE
        cap = start.cap_mhz
        events = (
            ", ".join(
                f"{d.kind} on GPU {d.gpu} at {time.strftime('%H:%M:%S', time.gmtime(d.time))} UTC "
                f"({', '.join(d.reasons)})"
                for d in start.dialbacks
            )
            or "none"
        )
        lines.append(
            f"| {name} | {start.source} | {start.samples} | "
            f"{'n/a' if cap is None else f'{cap:g}'} | {clocks} | {events} |"
        )
        lines += [f"|  |  |  |  |  | {problem} |" for problem in start.problems]
    return [*lines, ""]


def _token_cell(text: str) -> str:
    """A token as a table cell: visible spaces, no pipe breaking the table."""
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`" if text.strip() else repr(text)


def greedy_section(decision: Decision) -> list[str]:
    """The greedy diagnostics: what was compared and every first divergence, near-tie or real."""
    found = decision.greedy
    if found is None:
        return []
    lines = ["## Greedy diagnostics", "", f"**{found.line()}**", ""]
    lines += [f"- {note}" for note in found.notes]
    if found.divergences:
        lines += [
            "| start | against | cell | prompt | position | expected | got | top-2 margin | kind |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for d in found.divergences:
            lines.append(
                f"| {d.start} | {d.reference} | {d.cell} | {d.prompt} | {d.position} | "
                f"{_token_cell(d.expected)} | {_token_cell(d.got)} | {_num(d.margin, 3)} | "
                f"{'near-tie' if d.near_tie else '**REAL**'} |"
            )
    return [*lines, ""]
