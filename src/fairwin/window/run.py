"""The window as explicit, journaled steps: open, start s1, start s2, ... (the rule's starts), decide, archive, budget.

Each step is journaled as it begins and as it ends or fails, so a reader (or, later,
crash recovery and chained windows) knows exactly how far a window got. Taking
production down and restoring it will hook in as steps around the starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import shutil
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fairwin.decision import RULES, ArchiveNoise, Decision, RuleSpec, get_rule
from fairwin.durable import sha256_file, write_json_atomic
from fairwin.errors import FairwinError, Interrupted, PlanError
from fairwin.gates.power import error_rate_warnings, power_warnings
from fairwin.gates.sequence import GateInputs, actual_times, run_gates
from fairwin.launch.local import make_spec
from fairwin.launch.scheduling import ClientAffinity, check_cpus_exist
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.models import Mode
from fairwin.plan.schedule import resolve_mode, starts_for
from fairwin.pooling.pool import PooledRow
from fairwin.profiles import PROFILES
from fairwin.vocabulary import BUDGET, WINDOW
from fairwin.window.close import archive_controls, archive_noise, archive_path, decide_and_report
from fairwin.window.environment import capture
from fairwin.window.layout import WindowDir
from fairwin.window.runtime import check_declared_env, check_speculative
from fairwin.window.start import Launcher, StartContext, local_launcher, run_start


@dataclass(frozen=True)
class Preflight:
    mode_name: str
    mode: Mode
    rule: RuleSpec


def preflight(loaded: LoadedPlan, mode_name: str) -> Preflight:
    """Everything that can be refused before a directory is made or a server started."""
    mode = resolve_mode(loaded, mode_name)
    plan = loaded.plan
    check_cpus_exist("window.client_cpus", plan.window.client_cpus)
    for role in sorted({mode.control, mode.candidate}):
        spec = make_spec(role, plan.roles, loaded.base_dir)  # env files and {env:NAME} must resolve
        check_declared_env(spec)
        check_speculative(role, plan.roles[role].speculative, spec.argv, plan.runtime.standard_verification)
        check_cpus_exist(f"roles.{role}.cpus", plan.roles[role].cpus)
    rule = get_rule(plan.window.rule)
    check_counters(plan.window.counters, rule)
    return Preflight(mode_name=mode_name, mode=mode, rule=rule)


def check_counters(profile: str, rule: RuleSpec) -> None:
    """A rule reading server metrics needs a profile that reads the server's counters."""
    if PROFILES[profile].reads_counters or not rule.server_metrics:
        return
    fitting = sorted(r.id for r in RULES.values() if not r.server_metrics)
    raise PlanError(
        f'window.counters = "{profile}" reads no server counters, but rule {rule.id} decides on '
        f"{', '.join(rule.server_metrics)}, which come from them; set window.rule to one whose metrics the "
        f"client measures ({', '.join(fitting)})"
    )


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


def _deciding_noise(
    loaded: LoadedPlan, rule: RuleSpec, archive: Path, commit: str | None
) -> tuple[list[ArchiveNoise], list[str]]:
    """The archive's noise for the plan's cells, and the cells that decide."""
    plan = loaded.plan
    noise = archive_noise(archive, plan.cells, rule, commit, plan.window.production_clock_cap_mhz)
    return noise, [name for name, cell in plan.cells.items() if cell.decision]


def _archive_and_commit(loaded: LoadedPlan, output_dir: Path | None) -> tuple[Path, str | None]:
    """Where a run of this plan would find its archive, and the commit it would run at."""
    out = output_dir or loaded.resolve(loaded.plan.window.output_dir)
    return archive_path(loaded, out), capture(loaded.base_dir).get("git", {}).get("commit")


def preflight_power(loaded: LoadedPlan, rule: RuleSpec, archive: Path, commit: str | None) -> list[str]:
    """Warnings (never refusals) when the archive's noise makes the bar undetectable with this plan."""
    noise, deciding = _deciding_noise(loaded, rule, archive, commit)
    return power_warnings(rule, loaded.plan.window.repeats, noise, deciding)


def error_rate_check(loaded: LoadedPlan, rule: RuleSpec, output_dir: Path | None = None) -> list[str]:
    """Warnings when the plan's rule misses its error-rate targets at the control archive's noise."""
    noise, deciding = _deciding_noise(loaded, rule, *_archive_and_commit(loaded, output_dir))
    return error_rate_warnings(rule, loaded.plan.window.repeats, noise, deciding)


def power_check(loaded: LoadedPlan, rule: RuleSpec, output_dir: Path | None = None) -> list[str]:
    """The power warnings a run of this plan would print, without running it."""
    return preflight_power(loaded, rule, *_archive_and_commit(loaded, output_dir))


@contextlib.contextmanager
def http_errors_logged(path: Path) -> Iterator[None]:
    """Every HTTP error during the window, with the server's whole body, in the window's own log."""
    handler = logging.FileHandler(path, delay=True, encoding="utf-8")
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger = logging.getLogger("fairwin.http")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        handler.close()


def draw_order(rule: RuleSpec) -> str:
    """control-first unless the rule asks for a random order; then a fair coin from the OS."""
    if rule.order == "control-first":
        return "control-first"
    return secrets.choice(("control-first", "candidate-first"))


async def run_window(
    loaded: LoadedPlan,
    mode_name: str,
    *,
    launcher: Launcher = local_launcher,
    say: Callable[[str], None] = _quiet,
    output_dir: Path | None = None,
    order: str | None = None,
    gates: GateInputs | None = None,
) -> WindowResult:
    """Run one window. ``order`` overrides the rule's (tests; chained windows that balance orders)."""
    checked = preflight(loaded, mode_name)
    plan = loaded.plan
    out = output_dir or loaded.resolve(plan.window.output_dir)
    gate_summary = run_gates(loaded, mode_name, checked.mode, gates or GateInputs(), out)
    say(f"gates passed; estimated {gate_summary['budget']['measurement_end_s'] / 60:.1f} min of measurement")
    environment = capture(loaded.base_dir)
    commit = environment.get("git", {}).get("commit")
    archive = archive_path(loaded, out)
    warnings = preflight_power(loaded, checked.rule, archive, commit)
    for warning in warnings:
        say(f"warning: {warning}")
    chosen_order = order or draw_order(checked.rule)
    starts = starts_for(checked.mode, chosen_order, checked.rule.start_count)
    window = WindowDir.create(out, mode_name)
    ctx = StartContext(loaded=loaded, window=window, launcher=launcher, say=say)
    rows: list[PooledRow] = []
    decisions: list[Decision] = []

    async def open_window() -> None:
        shutil.copyfile(loaded.path, window.plan_copy)
        write_json_atomic(
            window.manifest,
            {
                "format": WINDOW.id,
                "window_id": window.window_id,
                "mode": mode_name,
                "control_role": checked.mode.control,
                "candidate_role": checked.mode.candidate,
                "order": chosen_order,
                "starts": [{"start": s.name, "kind": s.kind, "role": s.role} for s in starts],
                "plan_path": str(loaded.path),
                "plan_sha256": loaded.sha256,
                "rule_id": checked.rule.id,
                "rule_sha256": checked.rule.sha256,
                "archive": str(archive),
                "power_warnings": warnings,
                "gates": gate_summary,
                "families": {
                    name: {"prompts_sha256": fam.prompts_sha256, "order_sha256": fam.order_sha256}
                    for name, fam in loaded.families.items()
                },
                "environment": environment,
            },
        )
        say(f"window {window.window_id} opened at {window.path} ({chosen_order})")

    def start_step(index: int) -> Step:
        start = starts[index]

        async def action() -> None:
            rows.extend(await run_start(ctx, start))

        return Step(f"start {start.name}", action)

    async def decide_step() -> None:
        decisions.append(
            decide_and_report(
                loaded, window, mode=mode_name, order=chosen_order, rule=checked.rule, archive=archive, commit=commit
            )
        )

    async def archive_step() -> None:
        controls = {s.name: s.role for s in starts if s.kind == "control"}
        count = archive_controls(loaded, window, mode=mode_name, archive=archive, commit=commit, controls=controls)
        say(f"archived {count} control rows in {archive}")

    async def budget_step() -> None:
        record = {
            "format": BUDGET.id,
            "estimate": gate_summary["budget"],
            "actual_s": actual_times(window.journal),
        }
        write_json_atomic(window.path / "budget.json", record)

    steps = [
        Step("open", open_window),
        *(start_step(i) for i in range(len(starts))),
        Step("decide", decide_step),
        Step("archive", archive_step),
        Step("budget", budget_step),
    ]
    try:
        with http_errors_logged(window.path / "http-errors.log"), ClientAffinity(plan.window.client_cpus):
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
    # decision.json's own digest: a later edit of the decision itself is seen too (fairwin decide WINDOW).
    window.set_status("complete", verdict=decisions[0].verdict, decision_sha256=sha256_file(window.decision))
    return WindowResult(window=window, decision=decisions[0], rows=rows)
