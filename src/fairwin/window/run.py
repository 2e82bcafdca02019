"""The window as explicit, journaled steps: open, start s1, start s2, start s3, close.

Each step is journaled as it begins and as it ends or fails, so a reader (or, later,
crash recovery and chained windows) knows exactly how far a window got. Taking
production down and restoring it will hook in as steps around the starts.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from fairwin.decision import Decision, RuleSpec, decide, get_rule
from fairwin.errors import FairwinError, Interrupted
from fairwin.launch.local import make_spec
from fairwin.metrics.pool import PooledRow
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.models import Mode
from fairwin.plan.schedule import resolve_mode, starts_for
from fairwin.receipts import write_json_atomic, write_text_atomic
from fairwin.report.markdown import render_summary
from fairwin.window.environment import capture
from fairwin.window.layout import WindowDir
from fairwin.window.start import Launcher, StartContext, local_launcher, run_start

WINDOW_FORMAT = "fairwin.window/1"


@dataclass(frozen=True)
class Preflight:
    mode_name: str
    mode: Mode
    rule: RuleSpec


def preflight(loaded: LoadedPlan, mode_name: str) -> Preflight:
    """Everything that can be refused before a directory is made or a server started."""
    mode = resolve_mode(loaded, mode_name)
    for role in {mode.control, mode.candidate}:
        make_spec(role, loaded.plan.roles[role], loaded.base_dir)  # env files and {env:NAME} must resolve
    return Preflight(mode_name=mode_name, mode=mode, rule=get_rule(loaded.plan.window.rule))


@dataclass
class WindowResult:
    window: WindowDir
    decision: Decision
    rows: list[PooledRow] = field(default_factory=list)


@dataclass(frozen=True)
class Step:
    name: str
    action: Callable[[], Awaitable[None]]


def _quiet(_: str) -> None:
    return None


async def _run_steps(window: WindowDir, steps: list[Step]) -> None:
    for step in steps:
        window.journal_event(step.name, "begin")
        try:
            await step.action()
        except asyncio.CancelledError:
            window.journal_event(step.name, "interrupted")
            raise
        except BaseException as exc:
            window.journal_event(step.name, "failed", error=str(exc), error_type=type(exc).__name__)
            raise
        window.journal_event(step.name, "end")


async def run_window(
    loaded: LoadedPlan,
    mode_name: str,
    *,
    launcher: Launcher = local_launcher,
    say: Callable[[str], None] = _quiet,
    output_dir: Path | None = None,
) -> WindowResult:
    checked = preflight(loaded, mode_name)
    plan = loaded.plan
    window = WindowDir.create(output_dir or loaded.resolve(plan.window.output_dir), mode_name)
    ctx = StartContext(loaded=loaded, window=window, launcher=launcher, say=say)
    rows: list[PooledRow] = []
    decisions: list[Decision] = []
    starts = starts_for(checked.mode)

    async def open_window() -> None:
        shutil.copyfile(loaded.path, window.plan_copy)
        write_json_atomic(
            window.manifest,
            {
                "format": WINDOW_FORMAT,
                "window_id": window.window_id,
                "mode": mode_name,
                "control_role": checked.mode.control,
                "candidate_role": checked.mode.candidate,
                "order": [s.name + ":" + s.role for s in starts],
                "plan_path": str(loaded.path),
                "plan_sha256": loaded.sha256,
                "rule_id": checked.rule.id,
                "rule_sha256": checked.rule.sha256,
                "families": {
                    name: {"prompts_sha256": fam.prompts_sha256, "order_sha256": fam.order_sha256}
                    for name, fam in loaded.families.items()
                },
                "environment": capture(loaded.base_dir),
            },
        )
        say(f"window {window.window_id} opened at {window.path}")

    def start_step(index: int) -> Step:
        start = starts[index]

        async def action() -> None:
            rows.extend(await run_start(ctx, start))

        return Step(f"start {start.name}", action)

    async def close_window() -> None:
        decision = decide(
            rows,
            window_id=window.window_id,
            mode=mode_name,
            rule=checked.rule,
            decision_cells={name: cell.decision for name, cell in plan.cells.items()},
        )
        write_json_atomic(window.decision, decision)
        write_text_atomic(window.summary, render_summary(loaded, window, decision, rows))
        decisions.append(decision)

    steps = [
        Step("open", open_window),
        *(start_step(i) for i in range(len(starts))),
        Step("close", close_window),
    ]
    try:
        await _run_steps(window, steps)
    except asyncio.CancelledError:
        window.set_status("interrupted", error="interrupted (Ctrl-C or SIGTERM); every server was stopped")
        interrupted = Interrupted("interrupted; every server was stopped")
        interrupted.window_path = window.path
        raise interrupted from None
    except FairwinError as exc:
        window.set_status("failed", error=str(exc), error_type=type(exc).__name__)
        exc.window_path = window.path
        raise
    except BaseException as exc:
        window.set_status("failed", error=repr(exc), error_type=type(exc).__name__)
        raise
    window.set_status("complete", verdict=decisions[0].verdict)
    return WindowResult(window=window, decision=decisions[0], rows=rows)
