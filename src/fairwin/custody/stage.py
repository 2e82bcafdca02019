"""``fairwin stage PLAN``: bring each pinned checkout on its host to its pinned commit between windows, write
the artifacts it declares from a commit's tree (the qualified verifier, say), and keep a receipt.

Staging never discards work: a checkout with uncommitted changes to tracked files is refused, naming them.
A commit the checkout does not hold is fetched first (``git fetch --all``). Each artifact is written through
a temporary file and renamed, and its sha256 is read back on the host: the receipt says what the host holds
now, and the role's ``identity`` pins (checked at every start) can be set from it.
"""

from __future__ import annotations

import contextlib
import shlex
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from fairwin.custody.chain import in_progress, marker_path, read_marker
from fairwin.custody.hardware_lock import holding
from fairwin.errors import GateRefused
from fairwin.formats import STAGE, RecordFormat
from fairwin.launch.checkouts import check_checkout, pinned_checkouts
from fairwin.launch.identity import checkout, digests
from fairwin.launch.shell import shell
from fairwin.launch.spec import LaunchSpec
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.roles import RepoPin
from fairwin.plan.site import Site
from fairwin.records import Record, write_record


class StagedCheckout(BaseModel):
    """One checkout: where, the commit it was at and is at now, and each artifact written (``from``, ``sha256``)."""

    model_config = ConfigDict(extra="forbid")

    label: str
    host: str | None
    path: str
    before: str
    after: str
    artifacts: dict[str, dict[str, str]]


class StageRecord(Record):
    """``fairwin.stage/1``: what ``fairwin stage`` left on each host."""

    record_format: ClassVar[RecordFormat] = STAGE
    model_config = ConfigDict(extra="forbid")

    format: Literal["fairwin.stage/1"] = "fairwin.stage/1"
    time: float
    plan_path: str
    plan_sha256: str
    checkouts: list[StagedCheckout]


async def _git(spec: LaunchSpec, path: str, *args: str) -> tuple[int, str]:
    """A git command that changes the checkout (fetch, worktree add, checkout): never re-run blindly."""
    return await shell(spec.host, spec.remote, shlex.join(["git", "-C", path, *args]) + " 2>&1", retry="action")


async def _make_worktree(spec: LaunchSpec, pin: RepoPin) -> None:
    """``path`` made a git worktree of ``worktree_of`` at the pinned commit, when it is not there yet."""
    assert pin.worktree_of is not None
    code, _ = await shell(spec.host, spec.remote, f"test -e {shlex.quote(pin.path)}", retry="read")
    if code == 0:
        return
    add = ("worktree", "add", "--quiet", "--detach", pin.path, pin.commit)
    code, out = await _git(spec, pin.worktree_of, *add)
    if code != 0:
        await _git(spec, pin.worktree_of, "fetch", "--quiet", "--all")
        code, out = await _git(spec, pin.worktree_of, *add)
    if code != 0:
        raise GateRefused(
            f"{spec.label}: cannot make {pin.path} a worktree of {pin.worktree_of} at {pin.commit}: "
            f"{out.strip()[-200:]}"
        )


async def stage_one(spec: LaunchSpec, pin: RepoPin) -> StagedCheckout:
    """One checkout to its pinned commit (made first as a worktree where the pin says so), then its artifacts;
    raises GateRefused naming what stood in the way."""
    if pin.worktree_of is not None:
        await _make_worktree(spec, pin)
    before, changed = await checkout(spec, pin.path)
    if before is None:
        raise GateRefused(f"{spec.label}: {pin.path} is not a git checkout there (or git is missing)")
    if changed:
        raise GateRefused(
            f"{spec.label}: {pin.path} has uncommitted changes ({', '.join(changed[:3])}); staging "
            "never discards work: commit or stash them there first"
        )
    if not before.startswith(pin.commit):
        code, out = await _git(spec, pin.path, "checkout", "--quiet", "--detach", pin.commit)
        if code != 0:
            await _git(spec, pin.path, "fetch", "--quiet", "--all")
            code, out = await _git(spec, pin.path, "checkout", "--quiet", "--detach", pin.commit)
        if code != 0:
            raise GateRefused(f"{spec.label}: {pin.path} cannot check out {pin.commit}: {out.strip()[-200:]}")
    after = check_checkout(spec.label, pin, *(await checkout(spec, pin.path)))
    written = {dest: await _write_artifact(spec, pin.path, dest, source) for dest, source in pin.artifacts.items()}
    return StagedCheckout(
        label=spec.label, host=spec.host, path=pin.path, before=before, after=after["commit"], artifacts=written
    )


async def _write_artifact(spec: LaunchSpec, path: str, dest: str, source: str) -> dict[str, str]:
    """``git show COMMIT:FILE`` (or a copy of a built file on the host) into ``dest`` on the host, through a
    temporary file renamed; its sha256 there (and a built file's own, which must be the same)."""
    temporary, folder = shlex.quote(f"{dest}.fairwin-stage"), shlex.quote(str(Path(dest).parent))
    built = source.startswith("/")
    fill = (
        f"cp {shlex.quote(source)} {temporary}"
        if built
        else f"git -C {shlex.quote(path)} show {shlex.quote(source)} > {temporary}"
    )
    command = f"mkdir -p {folder} && {fill} && mv {temporary} {shlex.quote(dest)}"
    code, out = await shell(spec.host, spec.remote, command + " 2>&1", retry="action")
    if code != 0:
        await shell(spec.host, spec.remote, f"rm -f {temporary}", retry="action")
        raise GateRefused(f"{spec.label}: artifact {dest} from {source} could not be written: {out.strip()[-200:]}")
    read = await digests(spec, [dest, source] if built else [dest])
    if read[dest] is None:
        raise GateRefused(f"{spec.label}: artifact {dest} is not there after it was written")
    if built and read[source] != read[dest]:
        raise GateRefused(f"{spec.label}: artifact {dest} differs from {source} after the copy (it changed meanwhile)")
    return {"from": source, "sha256": str(read[dest])}


async def stage(loaded: LoadedPlan, roles: Iterable[str], receipt: Path, say: Callable[[str], None]) -> StageRecord:
    """Every pinned checkout of ``roles``, in turn; the receipt (``fairwin.stage/1``) once all are staged."""
    site = Site.of(loaded, roles)
    pinned = pinned_checkouts(site)
    if not pinned:
        raise GateRefused(
            f"{loaded.path}: no role of {', '.join(sorted(roles))} pins a checkout (repo = "
            "{ path, commit }); there is nothing to stage"
        )
    staged = []
    with _holding(site, loaded.output_dir(None), receipt):
        for spec, pin in pinned:
            done = await stage_one(spec, pin)
            moved = "already there" if done.before == done.after else f"from {done.before[:12]}"
            say(f"{spec.label}: {pin.path} at {done.after[:12]} ({moved}); {len(done.artifacts)} artifact(s) written")
            staged.append(done)
    document = StageRecord(time=time.time(), plan_path=str(loaded.path), plan_sha256=loaded.sha256, checkouts=staged)
    write_record(receipt, document)
    return document


@contextlib.contextmanager
def _holding(site: Site, out: Path, receipt: Path) -> Iterator[None]:
    """The hardware held while staging, as a window of these roles holds it: never in the middle of a window or a
    chain, and no window starts while a host is being staged. A refusal names the holder."""
    marker = marker_path(site, out)
    if (found := read_marker(marker)) is not None:
        raise GateRefused(f"{in_progress(marker, found)}; stage after it ends (`fairwin chain abort PLAN` ends it now)")
    with holding(site, out, "stage", receipt):
        yield
