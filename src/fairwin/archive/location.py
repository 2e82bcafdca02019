"""Opening the control archive at a location: a JSONL file's path, or a ``postgresql://`` URL.

Apart from store.py so that the backends, which build on the store's types, are imported
by this module and never the reverse.
"""

from __future__ import annotations

from pathlib import Path

from fairwin.archive.store import ArchiveStore, is_database
from fairwin.redaction import remember, url_passwords


def open_archive(location: str | Path) -> ArchiveStore:
    """The archive at a path (JSONL) or a ``postgresql://`` URL."""
    text = str(location)
    if is_database(text):
        from fairwin.archive.postgres import PostgresArchive  # psycopg only where a database is used

        remember(*url_passwords(text))  # an error message or a receipt never carries the password
        return PostgresArchive(text)
    from fairwin.archive.jsonl import JsonlArchive

    return JsonlArchive(Path(text))
