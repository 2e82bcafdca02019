"""Qualification carry: a change qualified at commit Q holds at the commit under test H only
if nothing outside the measurement layer changed.

Files are compared by git blob id (byte identity, without reading a byte). Declared
code units (``path.py::Qualified.Name``) are compared by ``ast.dump`` without
positions, so comments and formatting may change and a unit still carries; any
change to its code, docstring included, refuses.
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from fairwin.commands import runner
from fairwin.errors import CorruptRecordError, InputError, shortlist
from fairwin.formats import CARRY, RecordFormat
from fairwin.gates.foreign_admission import read_admission
from fairwin.gates.receipt import Receipt, admitting_problems, read_receipt, write_receipt
from fairwin.gates.refusal import refuse
from fairwin.plan.checks import Qualification

SHOWN = 10


class GitFailed(InputError):
    """git could not answer in the repository the plan names (not a repository, an unknown revision)."""


def git(repo: Path, *args: str) -> str:
    try:
        done = runner().run(["git", *args], cwd=repo, timeout_s=60)
    except (OSError, TimeoutError) as exc:
        raise GitFailed(f"cannot run git in {repo}: {exc}; check qualification.repo") from None
    if done.status != 0:
        raise GitFailed(f"git {' '.join(args)} failed in {repo}: {done.err.strip().splitlines()[-1:]}")
    return done.out


def resolve(repo: Path, revision: str) -> str:
    return git(repo, "rev-parse", "--verify", f"{revision}^{{commit}}").strip()


def expected_commit_problems(repo: Path, expected: str, head: str) -> list[str]:
    """Why ``repo``, at ``head``, is not at ``expected`` (a sha or any revision) with nothing tracked uncommitted
    ([] when it is). The runbook's --expected-experiment-commit."""
    try:
        wanted = resolve(repo, expected)
    except GitFailed:
        return [f"expected commit {expected} is not a commit of {repo}"]
    if head != wanted:
        return [
            f"{repo} is at {head[:12]}, not the expected commit {expected} ({wanted[:12]}); "
            f"check it out there, or run with the commit this window is for"
        ]
    changed = [line[3:] for line in git(repo, "status", "--porcelain", "--untracked-files=no").splitlines()]
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        return [
            f"{repo} is at the expected commit {head[:12]} but has uncommitted changes "
            f"({', '.join(changed[:3])}{more}); commit or stash them"
        ]
    return []


def require_commit(repo: Path, expected: str) -> str:
    """HEAD of ``repo``, refused (exit 4) unless it is ``expected`` and clean."""
    head = resolve(repo, "HEAD")
    refuse("expected commit", expected_commit_problems(repo, expected, head))
    return head


def blobs(repo: Path, commit: str) -> dict[str, str]:
    """path -> blob id for every file in the commit's tree."""
    out = git(repo, "ls-tree", "-r", "-z", "--full-tree", commit)
    result = {}
    for entry in out.split("\0"):
        if entry:
            meta, path = entry.split("\t", 1)
            result[path] = meta.split()[2]
    return result


def file_at(repo: Path, commit: str, path: str) -> str | None:
    try:
        return git(repo, "show", f"{commit}:{path}")
    except GitFailed:
        return None


def unit_dump(source: str, qualified: str) -> str | None:
    """ast.dump of the function, class or method at ``Qualified.Name``; None if there is none."""
    try:
        scope: list[ast.stmt] = ast.parse(source).body
    except SyntaxError:
        return None
    node: ast.stmt | None = None
    for part in qualified.split("."):
        node = next(
            (
                n
                for n in scope
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name == part
            ),
            None,
        )
        if node is None:
            return None
        scope = node.body
    return ast.dump(node, include_attributes=False) if node is not None else None


def protected(path: str, rules: Qualification) -> bool:
    """Must this file be identical? Outside the layer, or declared carried."""
    if path in rules.carried_files or any(path.startswith(prefix) for prefix in rules.carried_prefixes):
        return True
    return not any(fnmatch.fnmatchcase(path, glob) for glob in rules.measurement_layer)


class UnitCheck(BaseModel):
    """One declared unit (``path::name``) at the qualified commit and at HEAD: its AST's sha256 at each."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    qualified_sha256: str | None  # None: the unit is missing there
    head_sha256: str | None
    identical: bool


def _check_units(repo: Path, q: str, h: str, units: list[str]) -> tuple[dict[str, UnitCheck], list[str]]:
    results: dict[str, UnitCheck] = {}
    problems: list[str] = []
    for unit in units:
        path, _, name = unit.partition("::")
        dumps = []
        for commit in (q, h):
            source = file_at(repo, commit, path)
            dumps.append(None if source is None else unit_dump(source, name))
        at_q, at_h = dumps
        digests = [None if d is None else hashlib.sha256(d.encode()).hexdigest() for d in dumps]
        identical = at_q is not None and at_q == at_h
        results[unit] = UnitCheck(qualified_sha256=digests[0], head_sha256=digests[1], identical=identical)
        if at_q is None or at_h is None:
            problems.append(f"unit {unit} is missing at {'Q' if at_q is None else 'HEAD'}")
        elif not identical:
            problems.append(f"unit {unit} changed (its AST differs)")
    return results, problems


class CarryRecord(Receipt):
    """``fairwin.carry/1``: whether a qualification at one commit carries to the commit under test, and why."""

    record_format: ClassVar[RecordFormat] = CARRY
    model_config = ConfigDict(extra="forbid")

    format: Literal["fairwin.carry/1"] = "fairwin.carry/1"
    verdict: Literal["CARRIED", "REFUSED"]
    reasons: list[str]
    qualified_commit: str
    head: str
    admission: dict[str, str]  # the admission receipt's path and sha256
    artifacts: dict[str, str]
    rules: Qualification  # the [qualification] the carry was judged under
    files_compared: int
    files_differing: list[str]
    units: dict[str, UnitCheck]


def _admitted_commit(repo: Path, receipt_path: Path, commit: str) -> str:
    try:
        return resolve(repo, commit)
    except GitFailed:
        raise CorruptRecordError(
            f"{receipt_path}: names commit {commit}, which {repo} does not have; it was damaged, or is for another repo"
        ) from None


def carry(repo: Path, rules: Qualification, receipt_path: Path, qualified: str, head: str, out: Path) -> CarryRecord:
    """Write the carry receipt; refused (exit 4, after writing it) when the qualification does not carry."""
    admission, foreign = read_admission(receipt_path, rules.foreign_admission)
    q, h = resolve(repo, qualified), resolve(repo, head)
    problems: list[str] = []
    if admission.verdict != "QUALIFIED":
        problems.append(f"the admission receipt's verdict is {admission.verdict!r}, not QUALIFIED")
    if admission.commit and _admitted_commit(repo, receipt_path, admission.commit) != q:
        problems.append(f"the admission receipt names commit {admission.commit}, not {q}")
    at_q, at_h = blobs(repo, q), blobs(repo, h)
    missing = [f for f in rules.carried_files if f not in at_q]
    problems += [f"carried file {f} does not exist at the qualified commit" for f in missing]
    compared = sorted(p for p in at_q.keys() | at_h.keys() if protected(p, rules))
    differing = [p for p in compared if at_q.get(p) != at_h.get(p)]
    if differing:
        problems.append(f"files outside the measurement layer differ: {shortlist(differing, SHOWN)}")
    units, unit_problems = _check_units(repo, q, h, rules.carried_units)
    problems += unit_problems
    document = CarryRecord(
        verdict="REFUSED" if problems else "CARRIED",
        reasons=problems,
        qualified_commit=q,
        head=h,
        admission={
            "path": str(receipt_path),
            "sha256": hashlib.sha256(receipt_path.read_bytes()).hexdigest(),
            **({"foreign": foreign} if foreign else {}),
        },
        artifacts=admission.artifacts,
        rules=rules,
        files_compared=len(compared),
        files_differing=differing,
        units=units,
    )
    document = write_receipt(out, document)
    refuse(
        "qualification",
        [f"qualification does not carry from {q[:12]} to {h[:12]}: {p} (receipt: {out})" for p in problems],
    )
    return document


def carry_problems(path: Path, carried: CarryRecord, head: str, rules: Qualification | None) -> list[str]:
    """Why the carry receipt does not admit a window at ``head``: not CARRIED, to another commit, or under rules
    looser than the plan's ``[qualification]`` ([] when it admits)."""
    problems = admitting_problems(
        path,
        carried.verdict,
        carried.head,
        what="qualification",
        verdict="CARRIED",
        head=head,
        again="run `fairwin qualify carry` again",
    )
    looser = looser_than(carried.rules, rules) if rules is not None else []
    if looser:
        problems.append(
            f"the carry receipt {path} was made under a looser [qualification] than the plan's: "
            f"{'; '.join(looser)}; run `fairwin qualify carry` again with this plan"
        )
    return problems


def require_carry(path: Path, head: str, rules: Qualification | None) -> CarryRecord:
    """The carry receipt, refused (exit 4) unless it admits a window at ``head``."""
    carried = read_receipt(path, CarryRecord)
    refuse("qualification", carry_problems(path, carried, head, rules))
    return carried


def looser_than(used: Qualification, plan: Qualification) -> list[str]:
    """What a carry's rules (``used``) left out that the plan's hold: a carried file, prefix or unit it did not
    compare, or a glob it let change that the plan's measurement layer does not."""
    found = []
    for key, what in (
        ("carried_files", "carried file"),
        ("carried_prefixes", "carried prefix"),
        ("carried_units", "carried unit"),
    ):
        missing = sorted(set(getattr(plan, key)) - set(getattr(used, key)))
        found += [f"it did not hold {what} {name}" for name in missing]
    wider = sorted(set(used.measurement_layer) - set(plan.measurement_layer))
    found += [f"it let {glob} change, which the plan's measurement layer does not" for glob in wider]
    return found


def successor_problems(repo: Path, rules: Qualification, earlier: str, later: str) -> list[str]:
    """Why ``later`` is not a documented successor of ``earlier``: it must descend from it, and every file that
    differs must lie inside the measurement layer with the carried units unchanged (the carry's own test)."""
    if earlier == later:
        return []
    try:
        git(repo, "merge-base", "--is-ancestor", earlier, later)
    except GitFailed:
        return [f"commit {later[:12]} does not descend from {earlier[:12]}"]
    at_e, at_l = blobs(repo, earlier), blobs(repo, later)
    differing = sorted(p for p in at_e.keys() | at_l.keys() if protected(p, rules) and at_e.get(p) != at_l.get(p))
    problems = []
    if differing:
        problems.append(
            f"files outside the measurement layer changed since {earlier[:12]}: {shortlist(differing, SHOWN)}"
        )
    problems += _check_units(repo, earlier, later, rules.carried_units)[1]
    return problems
