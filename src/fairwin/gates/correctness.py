"""Correctness gate receipts: a recorded PASS of a check command at a commit, bound to artifact hashes.

``fairwin gate run`` runs the check (for example a CPU-only test suite of the
candidate's kernels), keeps its whole output in a log beside the receipt, and
records the exit status, the commit it ran at, the duration, the output's tail and
the sha256 of every declared artifact. Before a window, every required receipt must
be PASS at the commit under test, for the very artifacts the qualification recorded.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import ConfigDict

from fairwin.commands import runner
from fairwin.errors import InputError, UsageError
from fairwin.files import sha256_file
from fairwin.formats import GATE_RUN, RecordFormat
from fairwin.gates.qualify import git
from fairwin.gates.receipt import Receipt, admitting_problems, read_receipt, write_receipt
from fairwin.gates.refusal import refuse

TAIL_CHARS = 4000


class GateRunRecord(Receipt):
    """``fairwin.gate-run/1``: a correctness gate's command, run at a commit, and the artifacts it vouches for."""

    record_format: ClassVar[RecordFormat] = GATE_RUN
    model_config = ConfigDict(extra="forbid")

    format: Literal["fairwin.gate-run/1"] = "fairwin.gate-run/1"
    name: str
    verdict: Literal["PASS", "FAIL"]
    command: list[str]
    exit_status: int
    commit: str
    dirty: bool
    started_unix: float
    duration_s: float
    log: str
    output_tail: str
    artifacts: dict[str, str | None]  # path -> sha256 (None: the gate did not produce it)


def run_gate(name: str, command: Sequence[str], out: Path, artifacts: Sequence[Path], repo: Path) -> GateRunRecord:
    """Run the gate's command at the repository's HEAD and write its receipt; a FAIL is refused (exit 4) after the
    receipt is written, naming it and the log."""
    if not command:
        raise UsageError("gate run needs a command after --, the check to run")
    commit = git(repo, "rev-parse", "HEAD").strip()
    dirty = bool(git(repo, "status", "--porcelain", "--untracked-files=no").strip())
    log = out.with_suffix(".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    started, t0 = time.time(), time.monotonic()
    with log.open("wb") as handle:
        try:
            status = runner().run(command, output=handle).status
        except OSError as exc:  # not a FAIL: the check never ran (a typo, a missing tool)
            raise InputError(f"gate {name}: cannot run {command[0]!r}: {exc.strerror}; fix the command") from None
    duration = time.monotonic() - t0
    hashes = {str(path): sha256_file(path) if path.is_file() else None for path in artifacts}
    missing = [p for p, digest in hashes.items() if digest is None]
    verdict = "PASS" if status == 0 and not missing else "FAIL"
    document = GateRunRecord(
        name=name,
        verdict=verdict,
        command=list(command),
        exit_status=status,
        commit=commit,
        dirty=dirty,
        started_unix=started,
        duration_s=duration,
        log=str(log),
        output_tail=log.read_bytes()[-TAIL_CHARS:].decode("utf-8", "replace"),
        artifacts=hashes,
    )
    document = write_receipt(out, document)
    if verdict != "PASS":
        why = f"exit status {status}" if status != 0 else f"artifacts missing: {', '.join(missing)}"
        refuse(f"gate {name}", [f"gate {name} FAILED ({why}); receipt {out}, output in {log}"])
    return document


def gate_problems(
    path: Path, receipt: GateRunRecord, head: str, qualified_artifacts: dict[str, str] | None
) -> list[str]:
    """Why the receipt does not admit a window at ``head``: not PASS there, run on a dirty tree, or an artifact
    that is not the qualified one ([] when it admits)."""
    name = receipt.name
    problems = admitting_problems(
        path,
        receipt.verdict,
        receipt.commit,
        what=f"gate {name}",
        verdict="PASS",
        head=head,
        again="run the gate again at HEAD",
    )
    if receipt.dirty:
        problems.append(f"gate {name}: receipt {path} ran on a dirty work tree; commit, then run it again")
    for artifact, digest in receipt.artifacts.items():
        key = Path(artifact).name
        expected = qualified_artifacts.get(key) if qualified_artifacts is not None else None
        if qualified_artifacts is None:
            problems.append(f"gate {name}: artifact {key} needs --qualification to say which sha256 was qualified")
        elif expected is None:
            problems.append(f"gate {name}: artifact {key} is not among the qualified artifacts")
        elif expected != digest:
            problems.append(
                f"gate {name}: artifact {key} has sha256 {str(digest)[:16]}..., the qualified one "
                f"{expected[:16]}...; the artifact being measured is not the one that was qualified"
            )
    return problems


def require_gate(path: Path, head: str, qualified_artifacts: dict[str, str] | None) -> GateRunRecord:
    """The receipt, refused (exit 4) unless it is PASS at ``head`` for the qualified artifacts."""
    receipt = read_receipt(path, GateRunRecord)
    refuse("correctness receipts", gate_problems(path, receipt, head, qualified_artifacts))
    return receipt


def unbound_artifacts(receipts: Sequence[GateRunRecord], pins: dict[str, list[str]], remote: bool) -> list[str]:
    """Where a role of the window runs on another host, each gate artifact no identity pin holds: a remote server
    loads its own copy, and a local file (or its base name) says nothing about it."""
    if not remote:
        return []
    return [
        f"gate {receipt.name}: artifact {Path(artifact).name} (sha256 {str(digest)[:16]}...) is what no role of "
        "the window pins on its host; a remote server loads its own copy: pin it there (roles.R.identity "
        f'= {{ "/path/on/host" = "{digest}" }}), and every start checks the host holds it'
        for receipt in receipts
        for artifact, digest in receipt.artifacts.items()
        if str(digest) not in pins
    ]


def bind_to_hosts(receipts: Sequence[GateRunRecord], pins: dict[str, list[str]]) -> dict[str, list[str]]:
    """Each gate artifact to the identity pins (``"role B worker 1 on host w1: /opt/verifier.so"``) holding its
    sha256, which every start checks on its host before launching (:func:`unbound_artifacts`: those none holds)."""
    return {
        f"{receipt.name}: {Path(artifact).name}": pins[str(digest)]
        for receipt in receipts
        for artifact, digest in receipt.artifacts.items()
        if pins.get(str(digest))
    }
