"""The ``fairwin`` command. Thin: parse, call the library, print, map errors to exit codes.

Exit codes: 0 done (whatever the verdict), 1 other fairwin error, 2 bad input (nothing
was started; a stored file torn, edited or of another format included), 3 a window
failed (its directory is marked failed), 4 a gate refused (nothing was started), 5 the
API rehearsal did not pass, 6 production did not come back healthy (RESTORE FAILED),
130 interrupted. A bug's traceback is printed scrubbed of every resolved secret.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fairwin._version import __version__
from fairwin.cli import _archive, _chain, _decision, _gates, _production, _promote, _report, _window
from fairwin.cli._console import stderr
from fairwin.errors import FairwinError
from fairwin.redaction import ScrubbingFormatter, scrub

if TYPE_CHECKING:  # argparse's subparsers type is subscriptable only for type checkers
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fairwin",
        description="Decide fairly whether a serving change wins: windows where control and candidate take turns, "
        "the server's own counters pooled per repeat, and a registered decision rule.",
    )
    parser.add_argument("--version", action="version", version=f"fairwin {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log HTTP errors and details to stderr")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _plan_parsers(commands)
    _run_parser(commands)
    _sim_parser(commands)
    _prompts_parser(commands)
    _rehearse_parser(commands)
    _decision_parsers(commands)
    _archive.add_parsers(commands)
    _report.add_parsers(commands)
    _promote.add_parsers(commands)
    _gate_parsers(commands)
    _production_parsers(commands)
    _chain_parsers(commands)
    return parser


def _plan_parsers(commands: Commands) -> None:
    plan = commands.add_parser("plan", help="check a plan file or show its dry plan")
    plan_commands = plan.add_subparsers(dest="plan_command", required=True, metavar="SUBCOMMAND")
    check = plan_commands.add_parser("check", help="validate a plan and every file it pins")
    check.add_argument("plan", type=Path)
    check.set_defaults(func=_window.plan_check)
    show = plan_commands.add_parser("show", help="print the starts, waves, seeds, prompt ids and estimated duration")
    show.add_argument("plan", type=Path)
    show.add_argument("--mode", default="controlled", help="mode to show (default: controlled)")
    show.set_defaults(func=_window.plan_show)


def _run_parser(commands: Commands) -> None:
    run = commands.add_parser(
        "run", help="run one window: control and candidate take turns, as many starts as the rule registers"
    )
    run.add_argument("plan", type=Path)
    run.add_argument("--mode", default="controlled", help="mode to run (default: controlled)")
    run.add_argument("--out", help="directory to create the window in (default: the plan's window.output_dir)")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress lines or display")
    run.add_argument("--progress-json", action="store_true",
                     help="progress events (fairwin.progress/1) as JSON lines on stdout, not the tables")  # fmt: skip
    run.add_argument("--qualification", help="a CARRIED receipt from `fairwin qualify carry`")
    run.add_argument(
        "--require-gate", action="append", default=[], help="a PASS receipt from `fairwin gate run` (repeatable)"
    )
    run.add_argument("--require-rehearsal", help="a PASS rehearsal directory from `fairwin rehearse`")
    run.add_argument("--expected-commit", "--expected-experiment-commit", dest="expected_commit",
                     help="refuse unless the plan's repository ([qualification] repo) is at this commit and clean "
                     "(default: window.expected_commit)")  # fmt: skip
    run.add_argument("--coordinator", help="who runs this window, kept in the hardware's lock (default: "
                     "$FAIRWIN_COORDINATOR, else your user name)")  # fmt: skip
    chained = run.add_mutually_exclusive_group()
    chained.add_argument("--chain", action="store_true", help="leave production down for the next window of a chain "
                         "(placeholders hold the hardware; docs/chain.md)")  # fmt: skip
    chained.add_argument("--chain-last", action="store_true", help="the chain's last window: restore production")
    run.add_argument("--chain-production", help="production's new capture (`fairwin production snapshot`) when its "
                     "declaration changed since the chain left it down")  # fmt: skip
    run.set_defaults(func=_window.run)
    recover = commands.add_parser(
        "recover", help="after fairwin died: stop the window's servers, give production back, mark it interrupted"
    )
    recover.add_argument("plan", type=Path)
    recover.add_argument("--out", help="the plan's output directory, if not window.output_dir")
    recover.set_defaults(func=_window.recover)
    stage = commands.add_parser("stage", help="between windows: bring each pinned checkout on its host to its "
                                "commit and write its declared artifacts, with a receipt")  # fmt: skip
    stage.add_argument("plan", type=Path)
    stage.add_argument("--mode", help="only this mode's roles (default: every role that pins a checkout)")
    stage.add_argument("--receipt", type=Path, help="where the receipt goes (default: OUTPUT_DIR/stage-TIME.json)")
    stage.set_defaults(func=_window.stage)


def _sim_parser(commands: Commands) -> None:
    sim = commands.add_parser("sim", help="run the reference server (OpenAI-compatible, vLLM's metrics)")
    sim.add_argument("--host", default="127.0.0.1")
    sim.add_argument("--port", type=int, default=8000)
    sim.add_argument("--model", default="sim", help="served model name")
    sim.add_argument("--spec-tokens", type=int, default=0, help="draft tokens per round; 0 turns speculation off")
    sim.add_argument("--acceptance", default="", help="acceptance probability by position, e.g. 0.8,0.6,0.4")
    sim.add_argument("--draft-probability", type=float, default=1.0, help="chance a round proposes at all")
    sim.add_argument("--ms-per-round", type=float, default=5.0, help="decode round cost")
    sim.add_argument("--ms-per-draft-token", type=float, default=0.0, help="extra cost per proposed token")
    sim.add_argument("--prefill-ms-per-token", type=float, default=0.01)
    sim.add_argument("--jitter", type=float, default=0.02, help="relative s.d. of each round's time")
    sim.add_argument("--eos-token-id", type=int, default=2,
                     help="the end-of-sequence token: allowed_token_ids = [it] ends a stream at once")  # fmt: skip
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument(
        "--clock",
        choices=("model", "wall"),
        default="model",
        help="what the counters and per-request timing report: the modelled seconds, whatever the machine's load "
        "(model, the default: verdicts on the counters cannot be moved by CPU starvation), or the seconds the "
        "server's own clock saw (wall, as a real server reports)",
    )
    sim.add_argument("--fault", action="append", default=[], help="inject a fault (repeatable): see docs")
    sim.add_argument(
        "--api-key", help="answer 401 to /v1 requests without `Authorization: Bearer KEY` (default: $VLLM_API_KEY)"
    )
    sim.add_argument("--reject-param", action="append", default=[], help="answer 400 to requests with this key")
    sim.add_argument(
        "--per-request-metrics",
        action="store_true",
        help="put vLLM's per-request timing (`metrics`) on every usage chunk, as --enable-per-request-metrics does",
    )
    sim.set_defaults(func=_window.sim)


def _prompts_parser(commands: Commands) -> None:
    prompts = commands.add_parser("prompts", help="build prompt families and frozen order files from local text")
    prompts.add_argument(
        "--family",
        action="append",
        required=True,
        help="NAME or NAME=SOURCE; built-in: prose, code; SOURCE may be a .jsonl, a text file or a directory",
    )
    prompts.add_argument("--out", required=True, help="directory for NAME.jsonl and NAME.order.json")
    prompts.add_argument("--count", type=int, default=12, help="prompts per family")
    prompts.add_argument("--min-chars", type=int, default=20000, help="minimum characters per prompt")
    prompts.add_argument("--seed", type=int, default=42, help="seed of the frozen order")
    prompts.add_argument("--plan-dir", default=".", help="paths in the printed plan snippet are relative to this")
    prompts.add_argument("--tokens", type=int, help="also cut every prompt to exactly this many tokens")
    prompts.add_argument(
        "--tokenize-url", help="count tokens with this server's /tokenize (e.g. http://127.0.0.1:8000)"
    )
    prompts.add_argument("--model", default="", help="model name for --tokenize-url")
    prompts.add_argument("--tokenizer", help="count tokens with this local tokenizer.json instead of a server")
    prompts.set_defaults(func=_window.prompts)


def _rehearse_parser(commands: Commands) -> None:
    rehearse = commands.add_parser("rehearse", help="try every request shape of a window, tiny, against production")
    rehearse.add_argument("plan", type=Path)
    rehearse.add_argument("--url", help="production's base URL (default: the plan's rehearsal.url)")
    rehearse.add_argument("--out", required=True, help="a new directory for rehearsal.json and responses.jsonl")
    rehearse.add_argument("--model", help="production's served model (default: rehearsal.model or the first role's)")
    rehearse.add_argument("--api-key-env", help="send Authorization: Bearer $NAME (the key is never recorded)")
    rehearse.add_argument("--eos", type=int, help="the model's end-of-sequence token id: adds the terminator probe, "
                          "forced with allowed_token_ids (default: rehearsal.eos_token_id)")  # fmt: skip
    rehearse.set_defaults(func=_window.rehearse)


Handler = Callable[[argparse.Namespace], int]


def _plan_group(commands: Commands, group: str, text: str, entries: Sequence[tuple[str, Handler, str]]) -> Commands:
    """``fairwin GROUP SUB PLAN [--out DIR]`` for each entry; returns the subparsers for extra flags."""
    parser = commands.add_parser(group, help=text)
    which = parser.add_subparsers(dest=f"{group}_command", required=True, metavar="SUBCOMMAND")
    for name, func, help_text in entries:
        command = which.add_parser(name, help=help_text)
        command.add_argument("plan", type=Path)
        command.add_argument("--out", help="the plan's output directory, if not window.output_dir (its state)")
        command.set_defaults(func=func)
    return which


def _production_parsers(commands: Commands) -> None:
    which = _plan_group(commands, "production", "bring production up, take it down, or say which it is", (
        ("up", _production.up, "bring production up and prove it healthy (with --watch, watch it too)"),
        ("down", _production.down, "take production down and prove it: its port refuses, must_not_run absent"),
        ("status", _production.status, "print UP (exit 0) or DOWN (exit 1)"),
        ("snapshot", _production.snapshot, "write production's declaration and its sha256 (for --chain-production)"),
    ))  # fmt: skip
    which.choices["up"].add_argument("--watch", action="store_true", help="then watch it as a restore does")
    which.choices["snapshot"].add_argument("--to", required=True, help="the file (fairwin.production-snapshot/1)")


def _gate_parsers(commands: Commands) -> None:
    qualify = commands.add_parser("qualify", help="carry a qualification from commit Q to the commit under test")
    qualify_commands = qualify.add_subparsers(dest="qualify_command", required=True, metavar="SUBCOMMAND")
    carry = qualify_commands.add_parser("carry", help="check nothing outside the measurement layer changed")
    carry.add_argument("--plan", required=True, help="the plan whose [qualification] declares the layer")
    carry.add_argument("--receipt", required=True, help="the admission receipt (fairwin.admission/1, QUALIFIED)")
    carry.add_argument("--qualified-commit", required=True)
    carry.add_argument("--head", default="HEAD", help="the commit under test (default HEAD)")
    carry.add_argument("--repo", help="the git work tree (default: the plan's qualification.repo)")
    carry.add_argument("--out", required=True, help="where to write the carry receipt")
    carry.set_defaults(func=_gates.qualify_carry)

    gate = commands.add_parser("gate", help="correctness gate receipts")
    gate_commands = gate.add_subparsers(dest="gate_command", required=True, metavar="SUBCOMMAND")
    run = gate_commands.add_parser("run", help="run a check command and record a receipt: gate run ... -- CMD ...")
    run.add_argument("--name", required=True)
    run.add_argument("--out", required=True, help="the receipt; the full output goes beside it as .log")
    run.add_argument("--artifact", action="append", default=[], help="a file whose sha256 the receipt binds")
    run.add_argument("--repo", default=".", help="the git work tree whose HEAD the receipt records")
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    run.set_defaults(func=_gates.gate_run)

    budget = commands.add_parser("budget", help="how good the window estimates have been")
    budget_commands = budget.add_subparsers(dest="budget_command", required=True, metavar="SUBCOMMAND")
    history = budget_commands.add_parser("history", help="estimated against actual measurement time, per window")
    history.add_argument("--dir", default="windows", help="the directory of windows")
    history.set_defaults(func=_gates.budget_history)


def _chain_parsers(commands: Commands) -> None:
    which = _plan_group(commands, "chain", "windows that leave production down between them", (
        ("status", _chain.status, "where a chain stands: its windows, production, placeholders, the next order"),
        ("check-prev", _chain.check_prev, "gate the next window (marker, previous window, placeholders); a "
         "refusal aborts the chain"),
        ("abort", _chain.abort, "placeholders down, production restored and watched, the marker cleared"),
    ))  # fmt: skip
    which.choices["check-prev"].add_argument("--chain-production", help="production's new capture, as for run")


def _decision_parsers(commands: Commands) -> None:
    decide = commands.add_parser("decide", help="recompute a decision from a window directory or a pooled file")
    decide.add_argument("window", nargs="?", help="a window directory (uses its stored rows and context)")
    decide.add_argument("--pooled", help="decide from this pooled JSONL file alone (schema: docs/decision.md)")
    decide.add_argument("--mode", help="with --pooled: the mode the rows were measured in")
    decide.add_argument("--clock-cap-mhz", type=float, help="with --pooled: production's clock cap")
    decide.add_argument("--reported", action="append", default=[], help="with --pooled: a cell that never decides")
    decide.add_argument(
        "--rule", action="append", default=[],
        help="rule id, repeatable for several side by side (default: the window's own; for --pooled, the default rule)",
    )  # fmt: skip
    decide.add_argument("--archive", help="with a window: use this archive's noise as it is now")
    decide.add_argument("--json", action="store_true", help="print the decision document as JSON")
    decide.set_defaults(func=_decision.decide)

    compare = commands.add_parser("compare", help="verdicts and effects across windows (a chain's, or days)")
    compare.add_argument("windows", nargs="+", help="complete window directories, in the order to show them")
    compare.add_argument("--json", action="store_true", help="print fairwin.comparison/1 as JSON")
    compare.add_argument("--plot", metavar="FILE.png", help="also draw each cell's effect per window into this PNG")
    compare.set_defaults(func=_decision.compare)

    rules = commands.add_parser("rules", help="registered decision rules and their own error rates")
    rule_commands = rules.add_subparsers(dest="rules_command", required=True, metavar="SUBCOMMAND")
    rule_commands.add_parser("list", help="every registered rule").set_defaults(func=_decision.rules_list)
    show = rule_commands.add_parser("show", help="a rule's full definition and sha256")
    show.add_argument("rule")
    show.set_defaults(func=_decision.rules_show)
    audit = rule_commands.add_parser("audit", help="false-WIN, false-LOSS and power by seeded Monte Carlo")
    audit.add_argument("rule")
    audit.add_argument("--cv", type=float, help="relative s.d. of one repeat, in %%")
    audit.add_argument("--launch-cv", type=float, default=0.0, help="relative s.d. of one launch, in %% (default 0)")
    audit.add_argument(
        "--drift", type=float, default=0.0, help="the level's change from one start to the next, in %% (default 0)"
    )
    audit.add_argument("--noise-from", help="take both from this control archive (with --cell)")
    audit.add_argument("--cell", help="with --noise-from: the cell whose noise to use")
    audit.add_argument("--effect", type=float, default=0.0, help="a true effect in %% for the power (e.g. 5)")
    audit.add_argument("--repeats", type=int, default=3)
    audit.add_argument("--trials", type=int, default=4000)
    audit.add_argument("--seed", type=int, default=0)
    audit.add_argument("--json", action="store_true")
    audit.set_defaults(func=_decision.rules_audit)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, format="%(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # warnings reach stderr only with -v
        handler.setLevel(logging.INFO if args.verbose else logging.ERROR)
        handler.setFormatter(ScrubbingFormatter("%(name)s: %(message)s"))
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except FairwinError as exc:
        state = exc.window_state or f"marked {'interrupted' if exc.exit_code == 130 else 'failed'}"
        where = f" (window {state}: {exc.window_path})" if exc.window_path else ""
        after = f"; {exc.aftermath}" if exc.aftermath else ""
        stderr.print(scrub(f"fairwin: error: {exc}{where}{after}"), markup=False, soft_wrap=True)
        return exc.exit_code
    except KeyboardInterrupt:
        stderr.print("fairwin: interrupted", markup=False)
        return 130
    except Exception:  # a bug: its traceback is for the report, without any secret this process resolved
        sys.stderr.write(scrub(traceback.format_exc()))
        stderr.print("fairwin: internal error: the traceback above is a bug in fairwin; please report it",
                     markup=False)  # fmt: skip
        return 1


if __name__ == "__main__":
    sys.exit(main())
