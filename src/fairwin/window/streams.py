"""Appending a wave's streams to the window: their records, and their chunk timelines beside them."""

from __future__ import annotations

from collections.abc import Sequence

from fairwin.client.stream import StreamRecord
from fairwin.directory.layout import WindowDir
from fairwin.records import append_records


def append_streams(window: WindowDir, start: str, streams: Sequence[StreamRecord]) -> None:
    append_records(window.streams, streams)
    append_records(window.chunks(start), [s.timeline.sidecar_row(s.start, s.wave, s.stream) for s in streams])
