"""``fairwin.lock/1``: the record a window's hardware lock holds, wherever the lock is kept."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import ConfigDict, ValidationError

from fairwin.errors import CorruptRecordError
from fairwin.files import first_problem
from fairwin.formats import LOCK, RecordFormat
from fairwin.records import Record


class LockRecord(Record):
    """``fairwin.lock/1``: the window that holds production's hardware, and who runs it where. The lock file, the
    file on production's host and a PostgreSQL archive's locks all keep this record."""

    record_format: ClassVar[RecordFormat] = LOCK
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["fairwin.lock/1"] = "fairwin.lock/1"
    window_id: str
    window_path: str
    host: str
    pid: int
    coordinator: str
    started_unix: float

    @classmethod
    def shared(cls, text: str | bytes | object, where: str) -> LockRecord:
        """A record a shared lock (a lock file here, PostgreSQL, production's host) gave back: its JSON text, or
        the object a database decoded; one that is not a lock record is refused naming where it lies."""
        try:
            if isinstance(text, str | bytes):
                return cls.model_validate_json(text)
            return cls.model_validate(text)
        except ValidationError as exc:
            raise CorruptRecordError(f"the hardware's lock in {where}: {first_problem(exc)}") from None
