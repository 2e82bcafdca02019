"""The hardware's lock as one object: every lock a window takes, taken all or none and let go together.

A window, ``fairwin stage``, ``fairwin chain abort`` and ``check-prev``, and ``fairwin recover`` hold the hardware
the same way, through :class:`HardwareLock`:
the output directory's lock file (it names the window, so that ``recover`` finds it), this machine's locks (one
file per piece of hardware, whatever the output directory or plan) and the lock other coordinators see (a
PostgreSQL archive's rows, else a file on production's host). A window takes it when its directory is made and
lets it go last, once production is back and its status written; a command between windows holds it around
what it does (:func:`holding`); ``recover`` lets a dead window's go.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fairwin.archive import open_archive
from fairwin.archive.window_rows import archive_location
from fairwin.custody.lock import (
    HardwareLocks,
    acquire,
    acquire_shared,
    coordinator,
    lock_path,
    release,
    release_shared,
    shared_locks,
)
from fairwin.directory.lock_record import LockRecord
from fairwin.errors import ArchiveError
from fairwin.gates.refusal import refusal
from fairwin.plan.site import Site


@dataclass
class HardwareLock:
    """The output directory's lock file, and the stores of the hardware's shared locks with the keys taken there."""

    path: Path
    stores: list[HardwareLocks]
    keys: list[str]
    record: LockRecord | None = None  # while held: the record every lock holds

    @classmethod
    def of(cls, site: Site, path: Path, archive: object) -> HardwareLock:
        """Every lock on the hardware ``site`` touches (its lock keys), the lock file at ``path``; ``archive``: the
        control archive (a PostgreSQL one keeps the shared locks)."""
        return cls(path, shared_locks(site, archive), site.lock_keys)

    def take(self, holder: str, where: Path, who: str) -> LockRecord:
        """Every lock for ``holder`` (a window's id, a stage's), or none: a refusal (exit 4) names who holds one."""
        record = acquire(self.path, holder, where, who)
        try:
            acquire_shared(self.stores, self.keys, record)
        except BaseException:
            release(self.path, holder)
            raise
        self.record = record
        return record

    def release(self, holder: str | None = None) -> list[str]:
        """Let go of every lock ``holder`` holds (default: the one this took); never another's. The shared locks
        first, then the lock file, whatever the shared ones did; what could not be given back, for the caller to
        say (``fairwin recover`` gives it back later)."""
        holder = holder if holder is not None else self.record.window_id if self.record is not None else None
        if holder is None:
            return []
        problems: list[str] = []
        try:
            release_shared(self.stores, holder)
        except ArchiveError as exc:
            problems.append(f"the hardware's shared lock was not released ({exc})")
        finally:  # whatever the shared ones raised, the lock file goes
            release(self.path, holder)
            self.record = None
        return problems

    @contextlib.contextmanager
    def held(self, holder: str, where: Path, who: str) -> Iterator[LockRecord]:
        """Every lock, held for the ``with`` block and let go on every way out of it; a lock that could not be
        given back is an error once the block is done."""
        record = self.take(holder, where, who)
        try:
            yield record
        finally:
            problems = self.release()
        if problems:
            raise ArchiveError(f"{problems[0]}; `fairwin recover PLAN` releases it")


@contextlib.contextmanager
def holding(site: Site, out: Path, doing: str, where: Path) -> Iterator[LockRecord]:
    """Every lock a window of the site's roles would take, held by a command that acts on the hardware between
    windows (``doing``: ``stage``, ``chain-abort``) around the ``with`` block, as a window holds it: no window
    starts meanwhile, and a window running now refuses the command, named (exit 4). ``where``: what the lock
    records as the holder's path (its receipt, the chain's marker)."""
    holder = f"{doing}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
    try:  # this machine's locks, and the shared one other coordinators see
        hardware = HardwareLock.of(site, lock_path(site, out), open_archive(archive_location(site, out)))
    except ArchiveError as exc:
        raise refusal("hardware", [f"the hardware's shared lock cannot be read: {exc}"]) from None
    with hardware.held(holder, where, coordinator()) as record:
        yield record
