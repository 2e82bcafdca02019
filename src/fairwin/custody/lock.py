"""One window at a time on the hardware: a lock file naming the window that holds it.

The lock is created with ``O_CREAT | O_EXCL`` (atomic on a local filesystem) and holds
the window's id and directory, the host, fairwin's pid and the coordinator (who ran it:
``--coordinator`` or ``FAIRWIN_COORDINATOR``, else the user). A window removes its lock
only after its close. A lock left behind by a fairwin that died is not stale by age:
the window it names may have left production down and servers running, so
``fairwin run`` refuses until ``fairwin recover`` has finished that window.

A lock file holds against windows of this coordinator. Where the archive is a shared
PostgreSQL database, the window also takes the hardware there (one row per host it
touches, or per coordinator machine for what runs locally), so that a second coordinator
with its own lock file is refused too, naming who holds the hardware.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from fairwin.directory.lock_record import LockRecord
from fairwin.directory.status import Coordinator
from fairwin.errors import CorruptRecordError, GateRefused, OutputDirError
from fairwin.plan.site import Site
from fairwin.production.proof import pid_alive
from fairwin.records import read_record

#: Where this machine's hardware locks live unless FAIRWIN_LOCK_DIR says otherwise: kept across reboots, so a
#: window that died holding the hardware is still named after one.
MACHINE_LOCK_DIR = "/var/tmp/fairwin-locks"


def lock_path(site: Site, output_dir: Path) -> Path:
    setting = site.plan.window.lock
    return site.resolve(setting) if setting is not None else output_dir / ".window.lock"


def coordinator(given: str | None = None) -> str:
    return given or os.environ.get("FAIRWIN_COORDINATOR") or getpass.getuser()


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as its file says."""

    path: Path
    record: LockRecord

    @property
    def alive(self) -> bool:
        """The holding fairwin still runs (on this host; another host's is assumed alive)."""
        if self.record.host != socket.gethostname():
            return True
        return pid_alive(self.record.pid)

    @property
    def window_path(self) -> Path:
        return Path(self.record.window_path)

    def describe(self) -> str:
        r = self.record
        return (
            f"window {r.window_id} (pid {r.pid} on {r.host}, coordinator {r.coordinator}, "
            f"since {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(r.started_unix))})"
        )


def holder(path: Path) -> Holder | None:
    if not path.exists():
        return None
    return Holder(path, read_record(path, LockRecord))


class HardwareHeld(GateRefused):
    """Another window holds the hardware (or died holding it): refused without touching anything."""


def refuse_if_held(path: Path) -> None:
    """Refuse (exit 4) while a window holds the lock, naming it, and what to do when its fairwin died."""
    held = holder(path)
    if held is None:
        return
    if held.alive:
        raise HardwareHeld(f"the hardware is held by {held.describe()}; wait for it to finish ({path})")
    raise HardwareHeld(
        f"{held.describe()} died without finishing: its servers may still run (and production be down, where its "
        f"plan declares one); run `fairwin recover PLAN` first ({path})"
    )


def lock_record(window_id: str, window_path: Path, who: str) -> LockRecord:
    """What a lock holds: the window, and who runs it where (the coordinator's name, host and pid)."""
    return LockRecord(
        window_id=window_id,
        window_path=str(window_path),
        host=socket.gethostname(),
        pid=os.getpid(),
        coordinator=who,
        started_unix=time.time(),
    )


def coordinator_of(record: LockRecord) -> Coordinator:
    """Who runs a window, for window.json and status.json: the coordinator's name, its machine and fairwin's pid."""
    return Coordinator(name=record.coordinator, host=record.host, pid=record.pid)


def acquire(path: Path, window_id: str, window_path: Path, who: str) -> LockRecord:
    """Take the lock for a new window, or refuse (exit 4) naming who holds it and what to do; the lock's record."""
    record = lock_record(window_id, window_path, who)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        refuse_if_held(path)
        return acquire(path, window_id, window_path, who)  # released between the two calls: try once more
    except OSError as exc:  # the lock sits in the output directory unless window.lock moves it
        raise OutputDirError(
            f"cannot create a window under {path.parent} (its lock {path.name}): {exc.strerror}; choose a writable "
            "window.output_dir, or window.lock"
        ) from None
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(record.stored(), indent=2) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    return record


def release(path: Path, window_id: str) -> None:
    """Remove the lock if this window holds it (never another's)."""
    with contextlib.suppress(FileNotFoundError):
        held = holder(path)
        if held is not None and held.record.window_id == window_id:
            path.unlink()


@runtime_checkable
class HardwareLocks(Protocol):
    """An archive that also holds the hardware's locks across coordinators (PostgreSQL)."""

    def take_hardware(self, keys: list[str], record: LockRecord) -> LockRecord | None: ...

    def hardware_holder(self, keys: list[str]) -> LockRecord | None: ...

    def release_hardware(self, window_id: str) -> None: ...


def _shared_refusal(record: LockRecord, store: HardwareLocks) -> HardwareHeld:
    where = getattr(store, "location", "a shared lock")
    held = Holder(Path(), record)
    kind = "the shared archive's locks" if "://" in where else "the lock file"
    kind = "this machine's locks" if isinstance(store, MachineLocks) else kind
    if not held.alive:  # on this machine, and its fairwin is gone
        return HardwareHeld(
            f"the hardware is held by {held.describe()}, which died without finishing, in {kind} ({where}): "
            "its servers may still run (and production be down, where its plan declares one); run `fairwin recover "
            "PLAN` for its plan (its window: "
            f"{held.record.window_path})"
        )
    return HardwareHeld(
        f"the hardware is held by {held.describe()} ({held.record.window_path}), in {kind} ({where}); wait for it "
        "to finish, or, if its fairwin died, run `fairwin recover PLAN` where it ran"
    )


class MachineLocks:
    """The hardware's locks on this machine, one file per piece of hardware a window touches (this machine's CPUs
    and GPUs, each host by address), in one directory for every output directory, plan and user here:
    ``FAIRWIN_LOCK_DIR``, else :data:`MACHINE_LOCK_DIR`. The output directory's lock names a window for
    ``fairwin recover``; these make a second window on the same hardware wait, whatever its ``--out``. The same
    interface as the shared archive's locks; written here because no library keeps exclusive files per key."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def here(cls) -> MachineLocks:
        return cls(Path(os.environ.get("FAIRWIN_LOCK_DIR") or MACHINE_LOCK_DIR))

    @property
    def location(self) -> str:
        return str(self.directory)

    def _file(self, key: str) -> Path:
        return self.directory / (re.sub(r"[^A-Za-z0-9_.-]+", "_", key).strip("_") + ".lock")

    def _read(self, key: str) -> LockRecord | None:
        path = self._file(key)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CorruptRecordError(f"the hardware's lock {path}: {exc.strerror}") from None
        return LockRecord.shared(text, str(path))

    def take_hardware(self, keys: list[str], record: LockRecord) -> LockRecord | None:
        """Every key for the window ``record`` names, or none: None when taken, else the record of the window
        holding one."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(PermissionError):  # shared by every user here, as /tmp is
                self.directory.chmod(0o1777)
        except OSError as exc:
            raise OutputDirError(
                f"cannot keep this machine's window locks in {self.directory}: {exc.strerror}; set "
                "FAIRWIN_LOCK_DIR to a directory every fairwin on this machine can write"
            ) from None
        taken: list[str] = []
        for key in keys:
            try:
                fd = os.open(self._file(key), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                held = self._read(key)
                if held is not None and held.window_id == record.window_id:
                    continue
                for mine in taken:
                    self._file(mine).unlink(missing_ok=True)
                if held is None:  # released between the two calls: this window's turn once more
                    return self.take_hardware(keys, record)
                return held
            with os.fdopen(fd, "w") as handle:
                handle.write(json.dumps(record.stored()) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            taken.append(key)
        return None

    def hardware_holder(self, keys: list[str]) -> LockRecord | None:
        return next((held for key in keys if (held := self._read(key)) is not None), None)

    def release_hardware(self, window_id: str) -> None:
        for path in self.directory.glob("*.lock"):
            with contextlib.suppress(OSError, json.JSONDecodeError):
                if json.loads(path.read_text()).get("window_id") == window_id:
                    path.unlink(missing_ok=True)


def shared_locks(site: Site, archive: object) -> list[HardwareLocks]:
    """Where this window's hold on the hardware must be seen by other windows: this machine's locks (any output
    directory, any plan), then a PostgreSQL archive, else a lock file on production's host when production runs
    on one (other coordinators)."""
    here: list[HardwareLocks] = [MachineLocks.here()]
    if isinstance(archive, HardwareLocks):
        return [*here, archive]
    name = site.production_host
    if name is None or site.plan.production is None:
        return here
    from fairwin.custody.remote_lock import SshHardwareLock

    return [*here, SshHardwareLock(name, site.host(name), site.plan.production.hardware_lock)]


def refuse_if_held_elsewhere(locks: list[HardwareLocks], keys: list[str]) -> None:
    """Refuse (exit 4) while a window of any coordinator holds any of ``keys`` in these locks."""
    for store in locks:
        if (record := store.hardware_holder(keys)) is not None:
            raise _shared_refusal(record, store)


def acquire_shared(locks: list[HardwareLocks], keys: list[str], record: LockRecord) -> None:
    """Take ``keys`` in every shared lock for the window ``record`` names, all or none; refuse naming the holder."""
    taken: list[HardwareLocks] = []
    for store in locks:
        held = store.take_hardware(keys, record)
        if held is not None:
            release_shared(taken, record.window_id)
            raise _shared_refusal(held, store)
        taken.append(store)


def release_shared(locks: list[HardwareLocks], window_id: str) -> None:
    """Give back every key ``window_id`` holds in these locks."""
    for store in locks:
        store.release_hardware(window_id)
