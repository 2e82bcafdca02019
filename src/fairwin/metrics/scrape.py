"""Prometheus scrapes of the server's own counters, and their deltas.

A snapshot keeps every counter and histogram ``_sum``/``_count`` sample whose name
starts with the server profile's prefix (``vllm:``, ``llamacpp:``), summed over the
labels that only say *where* it was counted (``engine``, ``model_name``) and keyed
by the labels that say *what* was counted (``position``, ``finished_reason``, ...).
Histogram buckets and ``_created`` timestamps are dropped: pooling never needs them
and they would bloat every wave.
Gauges are never in a snapshot (a delta of a gauge means nothing); the ones a profile
waits on (llama.cpp's ``requests_processing``) are read beside it, as they are.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from fairwin.errors import HTTPStatusError, MetricsError
from fairwin.transport import get_text

Snapshot = dict[str, float]

#: Labels that locate a sample (summed over) rather than classify it (kept in the key).
LOCATION_LABELS = frozenset({"engine", "model_name"})
#: The metric types whose samples go into a snapshot (a parser reads an exposition without TYPE as unknown).
COUNTED = frozenset({"counter", "histogram", "summary", "untyped", "unknown"})


def _sample_key(name: str, labels: Mapping[str, str]) -> str:
    kept = sorted((k, v) for k, v in labels.items() if k not in LOCATION_LABELS)
    if not kept:
        return name
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in kept) + "}"


@dataclass(frozen=True)
class Exposition:
    """One read of /metrics: the profile's counters, the gauges asked for, and every series name seen."""

    counters: Snapshot
    gauges: dict[str, float]
    series: frozenset[str]


def parse_exposition(
    text: str, model: str | None = None, prefix: str = "vllm:", gauges: Collection[str] = ()
) -> Exposition:
    """Parse exposition text; ``model`` keeps only that model_name's samples, ``gauges`` are read as they are."""
    counters: Snapshot = {}
    read: dict[str, float] = {}
    series: set[str] = set()
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as exc:
        raise MetricsError(f"/metrics is not Prometheus text: {exc}") from None
    for family in families:
        for sample in family.samples:
            series.add(sample.name)
            if model is not None and sample.labels.get("model_name", model) != model:
                continue
            if family.type == "gauge":
                if sample.name in gauges:
                    read[sample.name] = read.get(sample.name, 0.0) + float(sample.value)
                continue
            if family.type not in COUNTED or not sample.name.startswith(prefix):
                continue
            if sample.name.endswith(("_created", "_bucket")):
                continue
            key = _sample_key(sample.name, sample.labels)
            counters[key] = counters.get(key, 0.0) + float(sample.value)
    return Exposition(counters, read, frozenset(series))


def parse_snapshot(text: str, model: str | None = None, prefix: str = "vllm:") -> Snapshot:
    """Parse exposition text into a snapshot of counters; ``model`` keeps only that model_name's samples."""
    return parse_exposition(text, model, prefix).counters


def delta(before: Snapshot, after: Snapshot) -> Snapshot:
    """after - before for every key either side has; a counter that went down is a restart."""
    result: Snapshot = {}
    for key in sorted(before.keys() | after.keys()):
        change = after.get(key, 0.0) - before.get(key, 0.0)
        if change < 0:
            raise MetricsError(
                f"counter {key} went down ({before.get(key)} -> {after.get(key)}): the server restarted "
                "inside a wave; the wave cannot be measured"
            )
        result[key] = change
    return result


async def read_exposition(
    session: aiohttp.ClientSession,
    base_url: str,
    model: str | None = None,
    prefix: str = "vllm:",
    gauges: Collection[str] = (),
) -> Exposition:
    try:
        text = await get_text(session, base_url + "/metrics", what="scrape /metrics")
    except HTTPStatusError as exc:
        raise MetricsError(
            f"{base_url}/metrics answered HTTP {exc.status}; fairwin pools the server's Prometheus counters, "
            "so metrics must be enabled (vLLM serves them by default; llama-server needs --metrics)"
        ) from None
    return parse_exposition(text, model, prefix, gauges)


async def scrape(
    session: aiohttp.ClientSession, base_url: str, model: str | None = None, prefix: str = "vllm:"
) -> Snapshot:
    return (await read_exposition(session, base_url, model, prefix)).counters
