"""``fairwin campaign``: the windows of several plans run at once (each its own Slurm job, their control starts in
one shared archive), gathered for one page.

Each output directory's windows are read as they were left: the job each ran in (window.json), its state and
verdict (status.json), and, once complete, its decision (checked against the digest its status sealed). Beside
them, the archive's control starts per key: how many, from how many windows, their spread, and each start's mean
of the primary by when it ran. Nothing here asks Slurm: the job's state now is the caller's to add.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fairwin.archive import Snapshot, groups, noise
from fairwin.decision import Decision
from fairwin.decision.inputs import ArchiveNoise
from fairwin.directory.layout import WindowDir
from fairwin.directory.manifest import WindowManifest
from fairwin.directory.status import WindowStatus
from fairwin.errors import InputError
from fairwin.records import read_record
from fairwin.verdict.stored import completed_decision


@dataclass(frozen=True)
class CampaignWindow:
    """One window of the campaign as its receipts say it."""

    window_id: str
    path: Path
    mode: str
    job: str | None  # the Slurm job it ran in; None outside one
    nodes: tuple[str, ...]
    state: str
    verdict: str | None
    decision: Decision | None  # complete windows only


@dataclass(frozen=True)
class ArchivedCell:
    """The archive's control starts of one key: their spread, and each start's (time, mean primary)."""

    cell: str
    role: str
    production: str  # the production commit its key names (the day-to-day spread of one production)
    noise: ArchiveNoise
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Campaign:
    windows: tuple[CampaignWindow, ...]
    archive: tuple[ArchivedCell, ...]
    metric: str


def campaign_windows(directories: list[Path]) -> list[CampaignWindow]:
    """Every window in these output directories, oldest first (a window's id begins with when it opened)."""
    found = []
    for directory in directories:
        if not directory.is_dir():
            raise InputError(f"{directory}: no such output directory; give the directories the plans' windows are in")
        for manifest in sorted(directory.glob("*/window.json")):
            window = WindowDir.at(manifest.parent)
            ran = read_record(window.manifest, WindowManifest)
            status = read_record(window.status, WindowStatus)
            cluster = ran.cluster
            found.append(
                CampaignWindow(
                    window_id=window.window_id,
                    path=window.path,
                    mode=ran.mode,
                    job=cluster.job_id if cluster is not None else None,
                    nodes=tuple(cluster.nodes) if cluster is not None else (),
                    state=status.state,
                    verdict=status.verdict,
                    decision=completed_decision(window) if status.state == "complete" else None,
                )
            )
    if not found:
        shown = ", ".join(str(d) for d in directories)
        raise InputError(f"no window in {shown}; give the output directories the plans' windows were written to")
    return sorted(found, key=lambda w: w.window_id)


def archived_cells(snapshot: Snapshot, metric: str) -> list[ArchivedCell]:
    """The archive's control starts per key (the noise each window pools), each start's mean by its time."""
    cells = []
    for key, rows in groups(list(snapshot.rows)).items():
        points = tuple(sorted((row.time, mean) for row in rows if (mean := row.mean(metric)) is not None))
        production = key.production_commit or "unknown"
        cells.append(
            ArchivedCell(
                cell=key.cell, role=key.role, production=production, noise=noise(rows, key.cell, metric), points=points
            )
        )
    return cells


def gather(directories: list[Path], snapshot: Snapshot | None) -> Campaign:
    """The campaign: its windows, and the archive's starts for the primary of its first decided window."""
    windows = campaign_windows(directories)
    decided = [w.decision for w in windows if w.decision is not None]
    metric = decided[0].rule.primary if decided else "pooled_rate_tps"
    archive = archived_cells(snapshot, metric) if snapshot is not None else []
    return Campaign(windows=tuple(windows), archive=tuple(archive), metric=metric)
