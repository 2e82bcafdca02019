"""Greedy diagnostics compared: identical, near-ties and real divergences, each at its first position."""

from __future__ import annotations

from fairwin.decision.divergence import GreedyStream, compare_greedy

SURE = [(" a", -0.05), (" b", -3.0)]


def stream(
    start: str, kind: str, tokens: list[str], top: list[list[tuple[str, float]]] | None = None, prompt: str = "prose/p1"
) -> GreedyStream:
    return GreedyStream(
        start=start,
        kind=kind,
        cell="c",
        prompt=prompt,
        tokens=tokens,
        top=top if top is not None else [[(t, -0.05), (" z", -3.0)] for t in tokens],
    )


def test_identical_streams_are_counted_and_nothing_diverges() -> None:
    found = compare_greedy([stream("s1", "control", [" a", " b"]), stream("s2", "candidate", [" a", " b"])], 0.1)
    assert (found.streams, found.compared, found.identical, found.divergences) == (2, 1, 1, [])
    assert "CORRECTNESS FAILURE" not in found.line()


def test_a_token_the_model_ranks_far_below_is_a_real_divergence_at_its_position() -> None:
    control = stream("s1", "control", [" x", " y", " a", " q"], [SURE] * 4)
    candidate = stream("s2", "candidate", [" x", " y", " b", " r"], [SURE] * 4)
    (found,) = compare_greedy([control, candidate], 0.1).divergences
    assert (found.start, found.reference, found.position, found.expected, found.got) == ("s2", "s1", 2, " a", " b")
    assert found.margin == 2.95 and not found.near_tie
    assert compare_greedy([control, candidate], 0.1).line().endswith("1 real divergence(s); CORRECTNESS FAILURE")


def test_two_tokens_nearly_tied_on_either_side_are_a_near_tie() -> None:
    control = stream("s1", "control", [" x", " a"], [SURE, SURE])
    candidate = stream("s2", "candidate", [" x", " b"], [SURE, [(" b", -0.69), (" a", -0.70)]])
    (found,) = compare_greedy([control, candidate], 0.1).divergences
    assert found.near_tie and abs((found.margin or 0) - 0.01) < 1e-9
    assert not compare_greedy([control, candidate], 0.005).divergences[0].near_tie  # a tighter margin


def test_a_token_outside_both_top_twos_or_a_shorter_stream_is_real() -> None:
    control = stream("s1", "control", [" a", " a"])
    odd = stream("s2", "candidate", [" a", " q"])
    short = stream("s2", "candidate", [" a"], prompt="prose/p2")
    found = compare_greedy([control, stream("s1", "control", [" a", " a"], prompt="prose/p2"), odd, short], 0.1)
    assert [(d.prompt, d.position, d.margin, d.near_tie) for d in found.divergences] == [
        ("prose/p1", 1, None, False),
        ("prose/p2", 1, None, False),
    ]


def test_every_stream_is_compared_once_against_the_first_control_start_or_a_stored_reference() -> None:
    streams = [
        stream("s1", "control", [" a"]),
        stream("s2", "candidate", [" a"]),
        stream("s3", "control", [" a"]),
        stream("s4", "candidate", [" b"]),
    ]
    found = compare_greedy(streams, 0.1)
    assert (found.compared, found.identical) == (3, 2) and found.divergences[0].reference == "s1"
    stored = compare_greedy(streams, 0.1, reference=[stream("ref", "reference", [" b"])])
    assert stored.compared == 4 and {d.reference for d in stored.divergences} == {"reference"}
    alone = compare_greedy([stream("s2", "candidate", [" a"])], 0.1)
    assert alone.compared == 0 and alone.notes == [
        "nothing to compare against: one diagnosed start and no stored reference"
    ]
