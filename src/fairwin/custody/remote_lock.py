"""The hardware's lock as a file on production's host, for coordinators that share no PostgreSQL archive.

Two coordinator machines, each with its own lock file, both reach production's host over
SSH: a window takes ``[production] hardware_lock`` there (default
``.fairwin/hardware.lock`` in the login's home) before its directory is made. The file is
created with the shell's ``noclobber`` (an exclusive create), holds the lock's record, and
is removed at the window's close or by ``fairwin recover``, only by the window it names.
Written here because SSH has no lock primitive; the record is the local lock's.
"""

from __future__ import annotations

import json
import shlex

from fairwin.commands import Retry
from fairwin.directory.lock_record import LockRecord
from fairwin.errors import ArchiveError, LaunchError
from fairwin.plan.hosts import Host


class SshHardwareLock:
    """One lock file on one host; the same interface as the PostgreSQL archive's hardware locks."""

    def __init__(self, name: str, host: Host, path: str) -> None:
        self.name, self.host, self.path = name, host, path

    @property
    def location(self) -> str:
        return f"{self.path} on host {self.name}"

    def _run(self, command: str, retry: Retry) -> tuple[int, str]:
        from fairwin.launch.ssh import blocking, run_once  # asyncssh only where a host is used

        try:
            done = blocking(run_once(self.name, self.host, command, 30.0, retry=retry))
        except LaunchError as exc:
            raise ArchiveError(f"the hardware's lock {self.location}: {exc}") from None
        return (done.exit_status if done.exit_status is not None else -1), str(done.stdout or "")

    def _read(self) -> LockRecord | None:
        code, out = self._run(f"cat -- {shlex.quote(self.path)} 2>/dev/null", "read")
        if code != 0 or not out.strip():
            return None
        return LockRecord.shared(out, self.location)

    def take_hardware(self, keys: list[str], record: LockRecord) -> LockRecord | None:
        """The lock for ``window_id`` (``keys`` are the archive's; one file holds the whole host): None when
        taken, else the record of the window that holds it."""
        path = shlex.quote(self.path)
        text = shlex.quote(json.dumps(record.stored()))
        code, _ = self._run(
            f"mkdir -p -- \"$(dirname -- {path})\" && (set -C; printf '%s\\n' {text} > {path})", "action"
        )
        if code == 0:
            return None
        held = self._read()
        return held if held is not None else self.take_hardware(keys, record)  # released meanwhile: once more

    def hardware_holder(self, keys: list[str]) -> LockRecord | None:
        return self._read()

    def release_hardware(self, window_id: str) -> None:
        held = self._read()
        if held is not None and held.window_id == window_id:
            self._run(f"rm -f -- {shlex.quote(self.path)}", "action")
