"""fairwin: did this change really make inference faster?

Windows where control and candidate take turns on one server's hardware, the
server's own counters pooled per repeat, and a registered decision rule.

The public API is what this module exports (``__all__``, documented in docs/api.md)::

    import asyncio, fairwin

    loaded = fairwin.load_plan("plan.toml")
    result = asyncio.run(fairwin.run_window(loaded, "controlled"))
    print(result.decision.verdict)                  # WIN, LOSS, NEUTRAL, NO-CHANGE or INCONCLUSIVE
    again = fairwin.decide_window(result.window.path)  # recompute it from the sealed files

Everything else (the subpackages ``plan``, ``gates``, ``window``, ...) is internal:
it may change between releases without notice. Names load on first use, so
``import fairwin`` stays cheap and the layers below never import this module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from fairwin.errors import (
    ArchiveError,
    CorruptRecordError,
    FairwinError,
    GateRefused,
    HealthTimeoutError,
    HostUnreachable,
    HTTPStatusError,
    InputError,
    Interrupted,
    LaunchError,
    LoadError,
    MetricsError,
    MissingExtraError,
    OutputDirError,
    PinMismatchError,
    PlanError,
    ProductionError,
    PromptError,
    RehearsalFailed,
    RestoreFailed,
    RuntimeCheckError,
    SchedulerError,
    ServerExitedError,
    StreamError,
    TransportError,
    UsageError,
    WaveError,
    WindowError,
)

if TYPE_CHECKING:
    from fairwin._version import __version__
    from fairwin.archive import read_archive
    from fairwin.archive.archive_row import ArchiveRow
    from fairwin.archive.store import Snapshot
    from fairwin.decision import (
        RULES,
        ArchiveNoise,
        AuditResult,
        CellDecision,
        Decision,
        DecisionRow,
        RuleSpec,
        WindowContext,
        audit,
        decide,
        get_rule,
    )
    from fairwin.directory.manifest import WindowManifest
    from fairwin.directory.start_receipt import StartReceipt
    from fairwin.directory.status import WindowStatus
    from fairwin.gates.sequence import GateInputs
    from fairwin.plan import LoadedPlan, Plan, load_plan
    from fairwin.records import Record, read_record, read_records
    from fairwin.rows import PooledRow
    from fairwin.verdict.stored import Recomputed, decide_window
    from fairwin.window.run import Window, WindowResult, open_window, run_window

#: Public name -> "module:attribute" it is loaded from.
_LAZY = {
    "__version__": "fairwin._version:__version__",  # read from the package metadata when asked for
    "LoadedPlan": "fairwin.plan:LoadedPlan",
    "Plan": "fairwin.plan:Plan",
    "load_plan": "fairwin.plan:load_plan",
    "GateInputs": "fairwin.gates.sequence:GateInputs",
    "Window": "fairwin.window.run:Window",
    "WindowResult": "fairwin.window.run:WindowResult",
    "open_window": "fairwin.window.run:open_window",
    "run_window": "fairwin.window.run:run_window",
    "decide_window": "fairwin.verdict.stored:decide_window",
    "Recomputed": "fairwin.verdict.stored:Recomputed",
    "RULES": "fairwin.decision:RULES",
    "RuleSpec": "fairwin.decision:RuleSpec",
    "get_rule": "fairwin.decision:get_rule",
    "decide": "fairwin.decision:decide",
    "Decision": "fairwin.decision:Decision",
    "DecisionRow": "fairwin.decision:DecisionRow",
    "WindowContext": "fairwin.decision:WindowContext",
    "ArchiveNoise": "fairwin.decision:ArchiveNoise",
    "audit": "fairwin.decision:audit",
    "AuditResult": "fairwin.decision:AuditResult",
    "PooledRow": "fairwin.rows:PooledRow",
    "read_archive": "fairwin.archive:read_archive",
    "Snapshot": "fairwin.archive.store:Snapshot",
    "ArchiveRow": "fairwin.archive.archive_row:ArchiveRow",
    "CellDecision": "fairwin.decision:CellDecision",
    "Verdict": "fairwin.decision.paired:Verdict",
    "WindowDir": "fairwin.directory.layout:WindowDir",
    "Record": "fairwin.records:Record",
    "read_record": "fairwin.records:read_record",
    "read_records": "fairwin.records:read_records",
    "WindowStatus": "fairwin.directory.status:WindowStatus",
    "WindowManifest": "fairwin.directory.manifest:WindowManifest",
    "StartReceipt": "fairwin.directory.start_receipt:StartReceipt",
}

__all__ = [
    "RULES",
    "ArchiveError",
    "ArchiveNoise",
    "ArchiveRow",
    "AuditResult",
    "CellDecision",
    "CorruptRecordError",
    "Decision",
    "DecisionRow",
    "FairwinError",
    "GateInputs",
    "GateRefused",
    "HTTPStatusError",
    "HealthTimeoutError",
    "HostUnreachable",
    "InputError",
    "Interrupted",
    "LaunchError",
    "LoadError",
    "LoadedPlan",
    "MetricsError",
    "MissingExtraError",
    "OutputDirError",
    "PinMismatchError",
    "Plan",
    "PlanError",
    "PooledRow",
    "ProductionError",
    "PromptError",
    "Recomputed",
    "Record",
    "RehearsalFailed",
    "RestoreFailed",
    "RuleSpec",
    "RuntimeCheckError",
    "SchedulerError",
    "ServerExitedError",
    "Snapshot",
    "StartReceipt",
    "StreamError",
    "TransportError",
    "UsageError",
    "Verdict",
    "WaveError",
    "Window",
    "WindowContext",
    "WindowDir",
    "WindowError",
    "WindowManifest",
    "WindowResult",
    "WindowStatus",
    "__version__",
    "audit",
    "decide",
    "decide_window",
    "get_rule",
    "load_plan",
    "open_window",
    "read_archive",
    "read_record",
    "read_records",
    "run_window",
]


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'fairwin' has no attribute {name!r}")
    module, _, attribute = target.partition(":")
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # loaded once
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
