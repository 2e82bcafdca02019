"""A many-arm window's candidates in summary.md (and so report.html): each one's verdict, the look that settled
it and why, the best of the WINs against the next, and every look."""

from __future__ import annotations

from fairwin.decision import Decision
from fairwin.decision.document import Arm


def _primary(arm: Arm) -> str:
    cell = next((c for c in arm.cells if c.decides), None)
    estimate = cell.primary.estimate if cell is not None and cell.primary is not None else None
    if estimate is None:
        return "not judged"
    level = f"{100 * estimate.confidence:.4g}%"
    return f"{estimate.point_pct:+.2f} % [{estimate.ci_low_pct:+.2f}, {estimate.ci_high_pct:+.2f}] ({level})"


def arms_section(decision: Decision) -> list[str]:
    """The candidates' table, the ranking and the looks; nothing for a two-arm window."""
    outcome = decision.arms
    if outcome is None:
        return []
    lines = [
        "## Candidates",
        "",
        f"The window ended: {outcome.line()}" + (f" ({outcome.stop_reason})" if outcome.stop_reason else "") + ".",
        f"**{outcome.ranking.line}.**",
        "",
        "| candidate | verdict | settled after | launched again | primary % [interval] at that look | why |",
        "|---|---|---|---|---|---|",
    ]
    for arm in outcome.arms:
        settled = f"round {arm.settled_after_round}" if arm.settled_after_round is not None else "open"
        again = "no (dropped)" if arm.dropped else "-"
        why = arm.why.replace("|", "/")
        lines.append(f"| {arm.candidate} | **{arm.verdict}** | {settled} | {again} | {_primary(arm)} | {why} |")
    lines += ["", "Looks:", ""]
    for look in outcome.looks:
        found = []
        for candidate, state in look.states.items():
            interval = look.primary.get(candidate)
            shown = f" {interval[0]:+.2f} % [{interval[1]:+.2f}, {interval[2]:+.2f}]" if interval else ""
            found.append(f"{candidate} {'cannot WIN' if state == 'NEUTRAL' else state}{shown}")
        lines.append(
            f"- after round {look.round} ({look.after} starts ran; {look.level:.2%} WIN interval): {'; '.join(found)}"
        )
    saved = outcome.max_starts - outcome.starts_used
    if saved > 0:
        lines.append(f"- {saved} of {outcome.max_starts} starts of hold not spent")
    return [*lines, ""]
