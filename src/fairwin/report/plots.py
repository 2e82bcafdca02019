"""The report's figures, drawn with matplotlib and returned as PNG bytes (embedded in report.html).

Each figure answers one question a reader asks of a window:

- **paired repeats**: did the candidate beat its control bracket in every repeat, and
  where does the primary's interval fall against zero and the bar?
- **rate over time**: did a start drift, warm up or throttle while it ran?
- **noise**: is the effect larger than what the same control does between starts (in
  this window, and day to day in the archive)?
- **candidates** (a many-arm window): which candidates beat the control, by how much, and how they rank?
- **across windows** (``fairwin compare``): do windows agree on the effect?
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from fairwin.errors import MissingExtraError

try:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
except ModuleNotFoundError as exc:  # an extra: a window closes without its figures, with a warning
    raise MissingExtraError("report", exc.name) from None

from fairwin.decision import CellDecision, Decision
from fairwin.directory.start_receipt import WaveRow

CONTROL, CANDIDATE, BAR = "#4c72b0", "#dd8452", "#55a868"
DPI = 110


def _figure(width: float, height: float) -> Figure:
    """A figure drawn by Agg straight to PNG: no pyplot, no display, no global figure registry (a window's
    close draws four of them, so the few hundred milliseconds pyplot would add are saved every time)."""
    figure = Figure(figsize=(width, height), layout="tight")
    FigureCanvasAgg(figure)
    return figure


def png(figure: Figure) -> bytes:
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=DPI)
    return out.getvalue()


def _interval_axes(axes: Any, points: Sequence[tuple[str, list[float] | None]], bar_pct: float, title: str) -> None:
    """Horizontal intervals (point, low, high) % against zero and the ± bar."""
    for row, (_, effect) in enumerate(points):
        if effect is None:
            # Just inside the left edge (axes coordinates across, data rows down): clear of the row's label.
            axes.text(
                0.01, row, "not measured", va="center", ha="left", fontsize=8, transform=axes.get_yaxis_transform()
            )
            continue
        point, low, high = effect
        axes.errorbar([point], [row], xerr=[[point - low], [high - point]], fmt="o", color=CANDIDATE, capsize=5)
    axes.axvline(0, color="black", linewidth=1)
    for edge in (-bar_pct, bar_pct):
        axes.axvline(edge, color=BAR, linestyle="--", linewidth=1)
    axes.set_yticks(range(len(points)), [label for label, _ in points])
    axes.set_ylim(-0.7, len(points) - 0.3)
    axes.set_xlabel(f"effect % (bar ±{bar_pct:g} %)")
    axes.set_title(title, fontsize=10)


def _level(decision: Decision) -> str:
    """The level the primary's interval was drawn at: a sequential window's last look's, else the rule's."""
    level = decision.sequential.looks[-1].level if decision.sequential and decision.sequential.looks else None
    return f"{(level if level is not None else decision.rule.confidence) * 100:.3g} %"


def paired_repeats(cell: CellDecision, decision: Decision) -> bytes | None:
    """Left: each repeat's control bracket and candidate, joined. Right: the primary's interval."""
    estimate = cell.primary.estimate if cell.primary is not None else None
    if estimate is None or not estimate.control:
        return None
    figure = _figure(9, 3.2)
    pairs, interval = figure.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.4]})
    for repeat, (control, candidate) in enumerate(zip(estimate.control, estimate.candidate, strict=False), 1):
        pairs.plot([0, 1], [control, candidate], color="grey", linewidth=1, zorder=1)
        pairs.scatter([0], [control], color=CONTROL, zorder=2)
        pairs.scatter([1], [candidate], color=CANDIDATE, zorder=2)
        pairs.annotate(f"r{repeat}", (1, candidate), xytext=(6, 0), textcoords="offset points", fontsize=7)
    pairs.set_xticks([0, 1], ["control bracket", "candidate"])
    pairs.set_xlim(-0.4, 1.5)
    pairs.set_ylabel(decision.rule.primary)
    pairs.set_title(f"{cell.cell}: paired repeats", fontsize=10)
    effect = [estimate.point_pct, estimate.ci_low_pct, estimate.ci_high_pct]
    _interval_axes(
        interval,
        [(cell.cell, effect)],
        decision.rule.bar_pct,
        f"{cell.verdict}: {_level(decision)} interval of {decision.rule.primary}",
    )
    return png(figure)


def rate_over_time(waves: Sequence[WaveRow], tokens: Mapping[tuple[str, str], float]) -> bytes | None:
    """Per cell, each start's rate by wave (completion tokens / wave seconds) against time since the first wave."""
    measured = [w for w in waves if w.ok and w.seconds and (w.start, w.wave) in tokens]
    if not measured:
        return None
    t0 = min(w.started_unix for w in measured)
    cells = list(dict.fromkeys(w.cell for w in measured))
    figure = _figure(9, 2.6 * len(cells))
    axes = figure.subplots(len(cells), 1, squeeze=False)
    for row, cell in enumerate(cells):
        ax = axes[row][0]
        for start in dict.fromkeys(w.start for w in measured if w.cell == cell):
            mine = [w for w in measured if w.cell == cell and w.start == start]
            times = [w.started_unix - t0 for w in mine]
            rates = [tokens[(start, w.wave)] / w.seconds for w in mine]
            ax.plot(times, rates, marker="o", markersize=3, label=f"{start} ({mine[0].role})")
        # Each wave's own rate, to see drift within a start: the decision pools per repeat (the primary), not this.
        ax.set_title(f"{cell}: completion tokens / wave seconds, by wave (not the primary metric)", fontsize=10)
        ax.set_ylabel("tok/s")
        ax.legend(fontsize=7, loc="best")
    axes[-1][0].set_xlabel("seconds since the window's first wave")
    return png(figure)


def noise(decision: Decision) -> bytes | None:
    """Per cell: the in-window OFF/OFF spreads next to the archive's day-to-day band and the bar."""
    cells = [c for c in decision.cells if c.noise is not None]
    if not cells:
        return None
    figure = _figure(9, 0.9 + 0.6 * len(cells))
    ax = figure.subplots()
    for row, cell in enumerate(cells):
        assert cell.noise is not None
        archive = cell.noise.archive
        if archive is not None and archive.launch_cv_pct is not None:
            band = archive.launch_cv_pct
            ax.barh(
                row,
                2 * band,
                left=-band,
                height=0.5,
                color=CONTROL,
                alpha=0.25,
                label="archive day-to-day ±" if row == 0 else None,
            )
        spreads = cell.noise.off_off_spread_pct
        ax.scatter(
            spreads,
            [row] * len(spreads),
            color=CONTROL,
            zorder=3,
            label="in-window control spread" if row == 0 else None,
        )
        estimate = cell.primary.estimate if cell.primary is not None else None
        if estimate is not None:
            ax.scatter(
                [estimate.point_pct], [row], marker="D", color=CANDIDATE, zorder=3, label="effect" if row == 0 else None
            )
    bar = decision.rule.bar_pct
    for edge in (-bar, bar):
        ax.axvline(edge, color=BAR, linestyle="--", linewidth=1)
    ax.axvline(0, color="black", linewidth=1)
    ax.set_yticks(range(len(cells)), [c.cell for c in cells])
    ax.set_xlabel(f"% of the control (bar ±{bar:g} %)")
    ax.set_title("noise next to the effect", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return png(figure)


def candidates(decision: Decision) -> bytes | None:
    """A many-arm window's candidates ranked by their primary's point, each with its interval at the look that
    settled it and its verdict, against zero and the bar."""
    if decision.arms is None:
        return None
    ranked = []
    for arm in decision.arms.arms:
        cell = next((c for c in arm.cells if c.decides), None)
        estimate = cell.primary.estimate if cell is not None and cell.primary is not None else None
        effect = [estimate.point_pct, estimate.ci_low_pct, estimate.ci_high_pct] if estimate is not None else None
        ranked.append((f"{arm.candidate}: {arm.verdict}", effect))
    ranked.sort(key=lambda found: found[1][0] if found[1] is not None else float("-inf"))
    figure = _figure(9, 1.0 + 0.5 * len(ranked))
    _interval_axes(figure.subplots(), ranked, decision.rule.bar_pct, decision.arms.ranking.line)
    return png(figure)


def across_windows(windows: Sequence[str], cells: Mapping[str, Mapping[str, list[float] | None]], bar: float) -> bytes:
    """``fairwin compare``: each cell's effect and interval in each window, one row per window."""
    figure = _figure(4.5 * len(cells), 1.0 + 0.5 * len(windows))
    axes = figure.subplots(1, len(cells), squeeze=False)
    for column, (cell, effects) in enumerate(cells.items()):
        _interval_axes(axes[0][column], [(w, effects.get(w)) for w in windows], bar, cell)
        if column:
            axes[0][column].set_yticklabels([])
    return png(figure)


def archive_over_time(series: Mapping[str, Sequence[tuple[float, float]]], metric: str) -> bytes | None:
    """``fairwin campaign``: each archived control start's mean ``metric`` by when it ran, one panel per archive key
    (``series``' names): the day-to-day spread the rule pools beside a window's own."""
    drawn = {cell: points for cell, points in series.items() if points}
    if not drawn:
        return None
    import datetime

    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    figure = _figure(4.5 * len(drawn), 3.0)
    axes = figure.subplots(1, len(drawn), squeeze=False)
    for column, (cell, points) in enumerate(drawn.items()):
        ax = axes[0][column]
        when = [datetime.datetime.fromtimestamp(t, tz=datetime.UTC) for t, _ in points]
        ax.plot(when, [value for _, value in points], "o", color=CONTROL, markersize=4)
        ax.set_title(f"{cell}: {len(points)} control starts")
        ax.set_ylabel(metric)
        locator = AutoDateLocator()  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    return png(figure)
