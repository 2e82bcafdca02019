"""campaign.html: one self-contained page over a campaign's windows (``fairwin campaign``).

At the top, each window's job, node, the job's state as Slurm says it now, the window's state and verdict, and
each deciding cell's verdict and effect with its interval; then every complete window's intervals side by side;
then the shared archive: per key, its control starts, from how many windows, and their spread (the noise each
window pooled), with each start's mean of the primary by when it ran. As report.html: inline styles, every
figure a ``data:`` PNG, nothing fetched.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path

from fairwin.files import write_text_atomic
from fairwin.report.compare import compare
from fairwin.report.decision_table import interval
from fairwin.report.html import STYLE, image, table
from fairwin.report.plots import across_windows, archive_over_time
from fairwin.verdict.campaign import Campaign, CampaignWindow


def _effects(window: CampaignWindow) -> str:
    if window.decision is None:
        return ""
    return "; ".join(f"{cell.cell}: {cell.verdict} {interval(cell.primary)}" for cell in window.decision.cells)


def _windows(campaign: Campaign, jobs: Mapping[str, str]) -> str:
    rows = [
        (
            w.job or "-",
            ",".join(w.nodes) or "-",
            jobs.get(w.job, "-") if w.job else "-",
            w.window_id,
            w.mode,
            w.state,
            w.verdict or "-",
            _effects(w),
        )
        for w in campaign.windows
    ]
    headers = ("job", "nodes", "job now", "window", "mode", "state", "verdict", "cells (primary's effect [95 %])")
    return table(headers, rows)


def _intervals(campaign: Campaign) -> str:
    decided = [w.decision for w in campaign.windows if w.decision is not None]
    if not decided:
        return '<p class="muted">no window is complete yet</p>'
    found = compare(decided)
    bar = max(w.bar_pct for w in found.windows)
    drawn = across_windows([w.window_id for w in found.windows], {c.cell: c.effects for c in found.cells}, bar)
    return image(drawn, "each complete window's effect and interval per cell")


def _archive(campaign: Campaign) -> str:
    if not campaign.archive:
        return '<p class="muted">no archive read, or no control start in it</p>'
    rows = [
        (
            number,
            a.cell,
            a.role,
            a.production[:24],
            a.noise.starts,
            a.noise.windows,
            f"{a.noise.launch_cv_pct:.2f}" if a.noise.launch_cv_pct is not None else "-",
            f"{a.noise.repeat_cv_pct:.2f}" if a.noise.repeat_cv_pct is not None else "-",
        )
        for number, a in enumerate(campaign.archive, 1)
    ]
    headers = ("key", "cell", "control", "production", "control starts", "windows", "launch cv %", "repeat cv %")
    spread = table(headers, rows)
    # One panel per key, numbered as the table's rows: two productions' controls are two spreads, never one.
    series = {f"key {number} ({a.cell})": a.points for number, a in enumerate(campaign.archive, 1)}
    return spread + image(archive_over_time(series, campaign.metric), "the archive's control starts over time")


def render_campaign(campaign: Campaign, jobs: Mapping[str, str], archive: str | None) -> str:
    """The page; ``jobs``: each job's state as Slurm says it now; ``archive``: where the archive was read."""
    complete = sum(w.state == "complete" for w in campaign.windows)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>fairwin campaign</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Campaign: {len(campaign.windows)} windows, {complete} complete</h1>",
        "<h2>Windows</h2>",
        _windows(campaign, jobs),
        "<h2>Intervals</h2>",
        _intervals(campaign),
        f"<h2>The control archive ({html.escape(campaign.metric)})</h2>",
        f"<p class='muted'>{html.escape(archive or 'not read')}</p>",
        _archive(campaign),
        "</body></html>",
    ]
    return "\n".join(parts)


def write_campaign(path: Path, campaign: Campaign, jobs: Mapping[str, str], archive: str | None) -> Path:
    write_text_atomic(path, render_campaign(campaign, jobs, archive))
    return path
