"""report.html: one self-contained page per window, for the people who decide on the change.

At the top, the verdict in one sentence and the rule's audited error rates; then the
figures (report/plots.py: each cell's paired repeats and interval against the bar,
each start's rate over time, the noise next to the effect); then the whole summary
(summary.md, rendered); then the receipts: gates, the decision's and plan's sha256,
production's restore and the journal's steps. Nothing is fetched when the page is
opened: the styles are inline and every figure is a ``data:`` PNG.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from fairwin.decision import Decision
from fairwin.directory.journal import RELEASE_STEP, JournalRow, read_journal
from fairwin.directory.layout import WindowDir
from fairwin.directory.manifest import WindowManifest
from fairwin.directory.start_receipt import WaveRow
from fairwin.directory.status import WindowStatus
from fairwin.files import scan_jsonl, write_text_atomic
from fairwin.formats import STREAM
from fairwin.records import read_record, read_records
from fairwin.report.error_rates import audited_rates

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 1.8em; }
.verdict { font-size: 1.3em; padding: .6em .9em; border-radius: 6px; background: #f3f3f3; }
.WIN { background: #e3f4e6; } .LOSS { background: #fbe3e0; } .INCONCLUSIVE, .NEUTRAL { background: #fdf5dc; }
table { border-collapse: collapse; margin: .6em 0; font-size: 12.5px; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f6f6f6; } code { font-size: 12px; background: #f4f4f4; padding: 0 3px; }
img { max-width: 100%; display: block; margin: .6em 0; } .muted { color: #777; }
"""


def image(data: bytes | None, alt: str) -> str:
    if data is None:
        return f'<p class="muted">{html.escape(alt)}: nothing to draw</p>'
    encoded = base64.b64encode(data).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{encoded}">'


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def verdict_sentence(decision: Decision) -> str:
    """The window's verdict in one sentence, naming the rule, the primary and each deciding cell's effect."""
    rule = decision.rule
    effects = []
    for cell in decision.cells:
        estimate = cell.primary.estimate if cell.primary is not None else None
        if cell.decides and estimate is not None:
            effects.append(
                f"{cell.cell} {cell.verdict} {estimate.point_pct:+.2f} % "
                f"[{estimate.ci_low_pct:+.2f}, {estimate.ci_high_pct:+.2f}]"
            )
        elif cell.decides:
            effects.append(f"{cell.cell} {cell.verdict}")
    ended = f" The window {decision.sequential.line(decision.verdict)}." if decision.sequential else ""
    return (
        f"{decision.verdict}: the candidate against its control under rule {rule.id}, {rule.primary} "
        f"with a {rule.bar_pct:g} % bar ({'; '.join(effects) or 'no deciding cell measured'}).{ended}"
    )


def _wave_tokens(streams: Path) -> dict[tuple[str, str], float]:
    """(start, wave) -> completion tokens of its measured streams (warm-up streams have no wave)."""
    tokens: dict[tuple[str, str], float] = {}
    # A view, not a decision: lines torn by a kill are left out, and so is a row of a format this fairwin
    # does not read (its fields could mean something else).
    rows = scan_jsonl(streams)[0] if streams.exists() else []
    for row in (r for r in rows if r.get("format") in STREAM.readable):
        if row.get("wave") and row.get("ok") and isinstance(row.get("completion_tokens"), int | float):
            key = (str(row["start"]), str(row["wave"]))
            tokens[key] = tokens.get(key, 0.0) + float(row["completion_tokens"])
    return tokens


def _figures(files: WindowDir, decision: Decision) -> list[str]:
    from fairwin.report import plots  # matplotlib is loaded only when a page is drawn (about 0.8 s)

    parts = []
    if decision.arms is not None:
        parts += ["<h2>The candidates, ranked</h2>", image(plots.candidates(decision), "candidates ranked")]
    parts += ["<h2>Each cell: paired repeats and the interval against the bar</h2>"]
    parts += [image(plots.paired_repeats(cell, decision), f"{cell.cell} paired repeats") for cell in decision.cells]
    waves = read_records(files.waves, WaveRow) if files.waves.exists() else []
    parts += [
        "<h2>Each start: rate by wave over time</h2>",
        "<p>Each wave's completion tokens over its seconds, to show drift within a start; the decision pools "
        "each repeat's counters (the primary), not these.</p>",
        image(plots.rate_over_time(waves, _wave_tokens(files.streams)), "rate over time"),
        "<h2>Noise next to the effect</h2>",
        image(plots.noise(decision), "noise"),
    ]
    return parts


def _receipts(files: WindowDir, manifest: WindowManifest | None, status: WindowStatus | None) -> list[str]:
    digests = [
        ("plan", manifest.plan_sha256 if manifest else None),
        (f"rule {manifest.rule_id if manifest else None}", manifest.rule_sha256 if manifest else None),
        ("decision.json", status.decision_sha256 if status else None),
    ]
    production = manifest.production if manifest else None
    if production is not None:
        digests.append(("production's declaration", production.sha256))
    parts = ["<h2>Receipts</h2>", table(["what", "sha256"], [(name, value or "n/a") for name, value in digests])]
    gates = manifest.gates.model_dump(mode="json", exclude_none=True) if manifest and manifest.gates else {}
    parts.append("<h3>Gates</h3>")
    parts.append(
        table(["gate", "record"], [(name, json.dumps(value, sort_keys=True)[:600]) for name, value in gates.items()])
    )
    restore = status.restore.model_dump(mode="json") if status and status.restore else None
    parts.append("<h3>Production</h3>")
    parts.append(f"<p>{html.escape(json.dumps(restore, sort_keys=True)) if restore else 'no production declared'}</p>")
    team = status.team_release if status is not None else None
    if team is not None:
        parts.append(f"<p>Team release ([custody]): {html.escape(team.said())} ({team.attempts} attempt(s))</p>")
    journal = files.journal
    if journal.exists():
        rows = read_journal(journal)[0]  # format-checked; a torn row is left out of the view
        opened = next((r.time for r in rows if r.event == "begin"), None)
        steps = [
            (r.step, _ended(r), f"{r.time - opened:.1f}")
            for r in rows
            if opened is not None and r.event in ("end", "failed", "interrupted")
        ]
        parts += ["<h3>The window's steps (journal)</h3>", table(["step", "ended", "s after open"], steps)]
    return parts


def _ended(row: JournalRow) -> str:
    """How a step ended, as the page says it: a team release that did not release is not simply 'end'."""
    if row.step == RELEASE_STEP and row.event == "end" and row.details.get("released") is False:
        return "end: NOT released (owed)"
    return row.event


def render_html(files: WindowDir, decision: Decision) -> str:
    """The whole page for a window directory whose decision is ``decision``."""
    manifest = read_record(files.manifest, WindowManifest) if files.manifest.exists() else None
    status = read_record(files.status, WindowStatus) if files.status.exists() else None
    summary = files.summary.read_text() if files.summary.exists() else ""
    rendered = MarkdownIt("commonmark", {"html": False}).enable("table").render(summary)
    title = html.escape(f"fairwin window {decision.window_id}")
    parts = [
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{title}</h1>",
        f"<p class='verdict {html.escape(decision.verdict)}'>{html.escape(verdict_sentence(decision))}</p>",
        f"<p>{html.escape(audited_rates(decision))}</p>",
        *_figures(files, decision),
        "<h2>The summary (summary.md)</h2>",
        rendered,
        *_receipts(files, manifest, status),
        "</body></html>",
    ]
    return "\n".join(parts)


def write_report(window: WindowDir, decision: Decision, path: Path | None = None) -> Path:
    """Write report.html (atomically) into the window, or to ``path``; returns where."""
    target = path if path is not None else window.report_page
    write_text_atomic(target, render_html(window, decision))
    return target
