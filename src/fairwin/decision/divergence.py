"""Greedy diagnostics, compared: does the candidate change greedy output beyond numerical near-ties?

Speculative decoding with standard verification must not change what a model writes
at temperature 0. Kernels are not bit-exact, so two greedy runs may part where the
model's top two tokens are nearly tied; anywhere else, a difference is a correctness
failure. Each diagnosed stream (temperature 0, top-2 logprobs at every position) is
compared token by token with its reference, the same prompt's stream from a stored
reference, else from the first diagnosed control start, else from the first diagnosed
start. At the first differing position the divergence is a **near-tie**
when, on either side, the two tokens are that side's top two and their logprobs lie
within the margin; otherwise it is a **real divergence**. Only the first position
counts: after it the two texts continue from different prefixes.

Pure: streams in, findings out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from fairwin.formats import GREEDY, RecordFormat
from fairwin.records import Record


class GreedyStream(Record):
    """``fairwin.greedy/1``: one temperature-0 stream, its tokens and, per position, the top-2 (token, logprob)."""

    record_format: ClassVar[RecordFormat] = GREEDY
    model_config = ConfigDict(extra="ignore", frozen=True)

    format: Literal["fairwin.greedy/1"] = "fairwin.greedy/1"
    start: str
    kind: str
    role: str = ""
    cell: str
    prompt: str  # family/prompt id
    tokens: list[str]
    top: list[list[tuple[str, float]]] = Field(default_factory=list)
    speculated: bool | None = None  # a speculative start: whether it drafted while these ran; None: not known


class Divergence(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    start: str
    reference: str  # the reference stream's start, or "reference" for a stored one
    cell: str
    prompt: str
    position: int  # 0-based index of the first token that differs
    expected: str
    got: str
    margin: float | None  # the smaller top-1 minus top-2 logprob of the two sides there; None if unknown
    near_tie: bool


class GreedyFindings(BaseModel):
    """What the diagnostics found: counted streams, and every first divergence, classified."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    margin: float
    streams: int
    compared: int
    identical: int
    divergences: list[Divergence] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @property
    def real(self) -> list[Divergence]:
        return [d for d in self.divergences if not d.near_tie]

    def line(self) -> str:
        near = len(self.divergences) - len(self.real)
        head = (
            f"greedy diagnostics: {self.compared} of {self.streams} streams compared, {self.identical} identical, "
            f"{near} near-tie(s) (margin < {self.margin:g}), {len(self.real)} real divergence(s)"
        )
        return head + ("; CORRECTNESS FAILURE" if self.real else "")


def _tie(side: GreedyStream, position: int, tokens: set[str], margin: float) -> float | None:
    """This side's top-1 minus top-2 logprob at the position when its top two are exactly the two tokens."""
    if position >= len(side.top) or len(side.top[position]) < 2:
        return None
    (first, lp1), (second, lp2) = side.top[position][:2]
    return lp1 - lp2 if {first, second} == tokens else None


def first_divergence(stream: GreedyStream, ref: GreedyStream, margin: float, ref_name: str) -> Divergence | None:
    for position, (got, expected) in enumerate(zip(stream.tokens, ref.tokens, strict=False)):
        if got != expected:
            margins = [m for m in (_tie(s, position, {got, expected}, margin) for s in (ref, stream)) if m is not None]
            smallest = min(margins) if margins else None
            return Divergence(
                start=stream.start,
                reference=ref_name,
                cell=stream.cell,
                prompt=stream.prompt,
                position=position,
                expected=expected,
                got=got,
                margin=smallest,
                near_tie=smallest is not None and smallest < margin,
            )
    if len(stream.tokens) != len(ref.tokens):
        shorter = min(len(stream.tokens), len(ref.tokens))
        return Divergence(
            start=stream.start,
            reference=ref_name,
            cell=stream.cell,
            prompt=stream.prompt,
            position=shorter,
            expected=(ref.tokens[shorter:] or ["<end>"])[0],
            got=(stream.tokens[shorter:] or ["<end>"])[0],
            margin=None,
            near_tie=False,
        )
    return None


def compare_greedy(
    streams: Sequence[GreedyStream], margin: float, reference: Sequence[GreedyStream] = ()
) -> GreedyFindings:
    """Every diagnosed stream against its reference (module docstring), in the order given."""
    kinds = [s.kind for s in streams]
    base_kind = "control" if "control" in kinds else (kinds[0] if kinds else "")
    base = next((s.start for s in streams if s.kind == base_kind), None)  # every stream's reference start
    stored = {(s.cell, s.prompt): s for s in reference}
    divergences, notes = [], []
    compared = identical = 0
    for stream in streams:
        key = (stream.cell, stream.prompt)
        ref, name = stored.get(key), "reference"
        if ref is None:
            ref, name = next((s for s in streams if s.start == base and (s.cell, s.prompt) == key), None), str(base)
            if ref is None or stream.start == base:
                continue
        compared += 1
        found = first_divergence(stream, ref, margin, name)
        if found is None:
            identical += 1
        else:
            divergences.append(found)
    if streams and not compared:
        notes.append("nothing to compare against: one diagnosed start and no stored reference")
    for start in dict.fromkeys(s.start for s in streams if s.speculated is False):
        notes.append(
            f"{start} did not speculate while its greedy streams ran (its draft counter did not move): "
            "the server may turn speculation off for requests that ask for logprobs, so these streams "
            "say nothing about speculative decoding"
        )
    return GreedyFindings(
        margin=margin,
        streams=len(streams),
        compared=compared,
        identical=identical,
        divergences=divergences,
        notes=notes,
    )
