"""The words every measurement shares: the starts' kinds and order, metric names, the pooled row.

A bottom layer (it imports only the format registry), so a metric name or a start's kind
is spelt once.

Starts: control and candidate take turns, beginning with the kind the order names. A
bracket (three starts) is control, candidate, control or candidate, control, candidate;
a rule may register more starts, which alternate the same way.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from fairwin.formats import POOLED, RecordFormat
from fairwin.records import Record

# -- Starts ------------------------------------------------------------------------------------------

Kind = Literal["control", "candidate"]
Order = Literal["control-first", "candidate-first"]
ORDER_NAMES: tuple[Order, ...] = ("control-first", "candidate-first")
#: Starts in a window unless its rule registers more.
BRACKET_STARTS = 3


def start_names(count: int) -> tuple[str, ...]:
    return tuple(f"s{i}" for i in range(1, count + 1))


def order_kinds(order: str, count: int = BRACKET_STARTS) -> dict[str, Kind]:
    """Each start's kind, in run order: they alternate, the first one named by ``order``."""
    first: Kind = "control" if order == "control-first" else "candidate"
    second: Kind = "candidate" if first == "control" else "control"
    return {name: (first if i % 2 == 0 else second) for i, name in enumerate(start_names(count))}


def williams_rows(arms: int) -> list[list[int]]:
    """The orders of a Williams design for ``arms`` arms: over them every arm follows every other equally often
    (once over ``arms`` rows for an even count; twice over the ``2 * arms`` rows and their mirrors for an odd one)."""
    first, low, high = [0], 1, arms - 1
    while len(first) < arms:
        first.append(low)
        low += 1
        if len(first) < arms:
            first.append(high)
            high -= 1
    rows = [[(arm + shift) % arms for arm in first] for shift in range(arms)]
    return rows + [row[::-1] for row in rows] if arms % 2 else rows


def round_orders(arms: Sequence[str], rounds: int, seed: int) -> list[list[str]]:
    """Each round's order of a many-arm window: the rows of a Williams design, its arms' labels and its rows
    shuffled by ``seed``, taken in turn, so that no arm always follows another. A round runs its row without the
    arms dropped by then (the window's own business)."""
    drawn = random.Random(seed)  # a design's shuffle, recorded by its seed: not a secret
    labels = list(arms)
    drawn.shuffle(labels)
    rows = williams_rows(len(labels))
    drawn.shuffle(rows)
    return [[labels[arm] for arm in rows[number % len(rows)]] for number in range(rounds)]


def _start_name(value: str) -> str:
    if not re.fullmatch(r"s[1-9][0-9]?", value):
        raise ValueError(f"a start is named s1, s2, ... in the order the starts ran, not {value!r}")
    return value


#: A start's name: s1, s2, ... in the order the starts ran.
Start = Annotated[str, AfterValidator(_start_name)]

# -- Metrics -----------------------------------------------------------------------------------------

#: The metrics a pooled row carries and a rule may read, in the order reports list them.
METRICS = ("pooled_rate_tps", "accepted_per_round", "decode_tps", "ms_per_round", "ttft_s")
#: Computed from the server's own counters; need a server profile with counters.
SERVER_METRICS = ("pooled_rate_tps", "accepted_per_round", "ms_per_round")
#: Timed by fairwin's client; every OpenAI-compatible server has them.
CLIENT_METRICS = ("decode_tps", "ttft_s")
#: Metrics where a smaller value is better; every other metric is higher-is-better.
LOWER_IS_BETTER = ("ms_per_round", "ttft_s")
#: What a metric does in a rule.
MetricRole = Literal["primary", "guard", "reported"]
MetricSource = Literal["server", "client"]


def metric_source(metric: str) -> MetricSource:
    """Who measured a metric: the server's counters or fairwin's client."""
    return "client" if metric in CLIENT_METRICS else "server"


# -- The pooled row ----------------------------------------------------------------------------------


#: A measured rate, ratio or duration: finite and never negative (a NaN or a negative rate means nothing).
Measured = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class MetricValues(BaseModel):
    """The metrics a repeat is measured by (``METRICS``, one field each); null when unobserved."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pooled_rate_tps: Measured | None = None
    accepted_per_round: Measured | None = None
    decode_tps: Measured | None = None
    ms_per_round: Measured | None = None
    ttft_s: Measured | None = None


class DecisionRow(MetricValues, Record):
    """One start x cell x repeat as a rule reads it; other fields of a pooled row are ignored.

    Metrics may be null: a rule that needs one is then INCONCLUSIVE. This is the documented
    input schema (docs/decision.md), so a file written by hand loads too.
    """

    record_format: ClassVar[RecordFormat] = POOLED
    model_config = ConfigDict(extra="ignore", frozen=True)

    format: Literal["fairwin.pooled/1"] = "fairwin.pooled/1"
    start: Start
    kind: Kind | None = Field(None, description="Omitted: taken from the window's order (control-first: s1 control).")
    role: str = ""
    cell: str
    repeat: int = Field(ge=1)
    clock_cap_mhz: float | None = None
    clock_caps_by_host: dict[str, float | None] | None = Field(
        None, description="The cap each host of the start ran at ('here' for fairwin's own), where it was read."
    )
    thermal_events: int | None = None
    power_events: int | None = Field(None, description="Power-cap dial-backs: reported; invalid only if the plan says.")
    client_problem: str | None = Field(None, description="Why the client-timed metrics are null, when they are.")


class PooledRow(DecisionRow):
    """A row as a window writes it to pooled.jsonl: the decision's fields and the sums they come from.

    The server's sums and the metrics made of them are null when the window's server
    profile reads no counters (``window.counters = "none"``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    window_id: str
    kind: Kind | None
    waves: int
    streams: int
    # Server counter sums over the repeat's waves.
    generation_tokens: float | None
    first_tokens: float | None
    accepted_tokens: float | None
    drafts: float | None
    draft_tokens: float | None
    decode_steps: float | None
    rounds: float | None
    decode_s: float | None
    prefix_cache_hits: float | None
    # Client side, over the repeat's trusted streams: tokens after the first, and first-to-last-token seconds.
    client_decode_tokens: float
    client_decode_s: float
    client_streams: int | None = None  # streams whose client timing pooled (None: written before the rule)
    # The server's own per-request decode seconds over the same (pooled) streams, when it reported them.
    server_stream_decode_s: float | None = None
