"""A window and the control archive: its key, the one snapshot it reads, and the rows it appends.

At open the window reads the archive once (:class:`~fairwin.archive.Snapshot`) and
records what it needs to key its rows (production's commit, each cell's shape, each host's
name) in ``window.json``. The power warnings at open and the noise at decide both come from
that one snapshot, so a window appending meanwhile changes neither. The rows appended at
the end are built from the window's directory alone, which is why ``fairwin archive append
WINDOW`` can retry an append that failed (the archive skips what it already holds).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fairwin.archive import ArchivedRepeat, ArchiveRow, Snapshot, chosen_location, noise
from fairwin.archive.archive_row import PlannedKey
from fairwin.decision import ArchiveNoise, RuleSpec
from fairwin.directory.journal import start_step
from fairwin.directory.layout import WindowDir
from fairwin.directory.manifest import CellShape, WindowArchiveKey
from fairwin.directory.start_receipt import StartReceipt
from fairwin.directory.window_records import WindowRecords
from fairwin.errors import CorruptRecordError
from fairwin.plan.models import Plan
from fairwin.plan.site import Site
from fairwin.production.control import snapshot as production_snapshot
from fairwin.rows import METRICS
from fairwin.telemetry.gpu import HERE


def archive_location(site: Site, output_dir: Path) -> str:
    setting = site.plan.window.archive
    return chosen_location(str(setting) if setting is not None else None, site.base_dir, output_dir)


def production_commit(site: Site) -> str | None:
    """What production runs: the declared ``[production] commit``, else its declaration's digest (the same
    argv, environment and env files are the same build as far as fairwin can tell); None without production."""
    settings = site.plan.production
    if settings is None:
        return None
    return settings.commit or f"snapshot:{production_snapshot(site).sha256[:16]}"


def host_names(site: Site) -> dict[str, str]:
    """Each host a plan names, as the archive keys it: fairwin's own by its host name, the others by address."""
    names = {HERE: socket.gethostname()}
    for name, host in site.plan.hosts.items():
        names[name] = host.address if host.port == 22 else f"{host.address}:{host.port}"
    return names


def archive_key_record(site: Site) -> WindowArchiveKey:
    """window.json's ``archive_key``: what the window's rows are keyed by besides what its starts observe."""
    return WindowArchiveKey(
        production_commit=production_commit(site),
        hosts=host_names(site),
        cells={
            name: CellShape(
                prompt_tokens=cell.prompt_tokens,
                max_tokens=cell.max_tokens,
                concurrency=cell.concurrency,
                temperature=cell.temperature,
            )
            for name, cell in site.plan.cells.items()
        },
    )


def planned_match(
    site: Site, mode: str, control: str, cell: str, production_cap_mhz: float | None = None
) -> PlannedKey:
    """The key a window of this plan matches archived control starts of ``cell`` on, before any start ran:
    ``window.archive_key``'s fields (the cell always), the clock cap being production's (every start must run at
    it). The gates, every look and the decision count the rows this key selects, and nothing else."""
    return match_in(site.plan, archive_key_record(site), mode, control, cell, production_cap_mhz)


def match_in(
    plan: Plan, key: WindowArchiveKey, mode: str, control: str, cell: str, production_cap_mhz: float | None
) -> PlannedKey:
    """:func:`planned_match` from a plan and the archive key recorded for it (a window's own, when it is decided
    again from its directory)."""
    role = plan.roles[control]
    known: dict[str, object] = {
        "role": control,
        "mode": mode,
        "production_commit": key.production_commit,
        **key.cells[cell].model_dump(),  # the cell's shape, field for field
        "hosts": tuple(
            sorted({key.hosts.get(h or HERE, h or HERE) for h in (role.host, *(w.host for w in role.workers))})
        ),
        "clock_cap_mhz": production_cap_mhz,
    }
    return PlannedKey(cell=cell, **{name: known[name] for name in plan.window.archive_key if name != "cell"})


def control_rows(window: WindowDir, records: WindowRecords | None = None) -> list[ArchiveRow]:
    """The archive rows of a window's finished control starts, from its directory alone (``records``: as the
    caller already read them)."""
    found = records if records is not None else WindowRecords.read(window)
    manifest = found.manifest
    key = manifest.archive_key
    if key is None:
        raise CorruptRecordError(
            f"{window.path}/window.json has no archive_key (written by an older fairwin); "
            "its control starts cannot be keyed for the archive"
        )
    pooled = found.pooled
    ended = {e.step: e.time for e in found.journal if e.event == "end"}
    rows = []
    for start in (s for s in manifest.starts if s.kind == "control"):
        receipt = found.receipt(start.start)
        seen = _observed(receipt, key.hosts) if receipt is not None else None
        for cell, shape in key.cells.items():
            mine = sorted((p for p in pooled if p.start == start.start and p.cell == cell), key=lambda p: p.repeat)
            if not mine or seen is None:
                continue
            caps = {p.clock_cap_mhz for p in mine}
            rows.append(
                ArchiveRow(
                    window_id=manifest.window_id,
                    time=ended.get(start_step(start.start), 0.0),
                    commit=manifest.commit,
                    mode=manifest.mode,
                    role=start.role,
                    start=start.start,
                    cell=cell,
                    max_tokens=shape.max_tokens,
                    clock_cap_mhz=caps.pop() if len(caps) == 1 else None,
                    repeats=[ArchivedRepeat(repeat=p.repeat, **{k: getattr(p, k) for k in METRICS}) for p in mine],
                    production_commit=key.production_commit,
                    prompt_tokens=shape.prompt_tokens,
                    concurrency=shape.concurrency,
                    temperature=shape.temperature,
                    **seen,
                )
            )
    return rows


def _observed(receipt: StartReceipt, hosts: dict[str, str]) -> dict[str, Any]:
    """Where a start ran (its hosts), its GPUs (model and count) and each host's clock cap, from start.json: the cap
    from wherever the plan reads caps (the GPUs, or each host's server log under ``cap_from = "log"``)."""
    head = receipt.host or HERE
    ran_on = {hosts.get(h or HERE, h or HERE) for h in (head, *(w.host for w in receipt.workers or []))}
    telemetry = receipt.telemetry
    caps = telemetry.cap_by_host if telemetry is not None else {}
    models = sorted(set(telemetry.names.values())) if telemetry is not None else []
    gpus = telemetry.gpus if telemetry is not None else []
    return {
        "hosts": sorted(ran_on),
        "gpu_model": "+".join(models) if models else None,
        "gpu_count": len(gpus) if gpus else None,
        "clock_caps_mhz": {hosts.get(host, host): cap for host, cap in sorted(caps.items())},
    }


def window_noise(snapshot: Snapshot, planned: Mapping[str, PlannedKey], rule: RuleSpec) -> list[ArchiveNoise]:
    """The archive's noise for each cell and metric the rule reads, over the rows each cell's planned key
    selects (:func:`planned_match`): the same rows whether the gates count them or a look decides with them."""
    result = []
    for cell, match in planned.items():
        chosen = [row for row in snapshot.rows if match.matches(row)]
        result += [noise(chosen, cell, metric, snapshot.problems) for metric in (rule.primary, *rule.guards)]
    return result
