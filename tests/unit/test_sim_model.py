from __future__ import annotations

from fairwin.sim.model import Drafter, SimConfig, tokenize


def test_tokenizer_is_prefix_monotone() -> None:
    text = "def f(x):\n    return  x + 1  # done"
    counts = [len(tokenize(text[:i])) for i in range(len(text) + 1)]
    assert counts == sorted(counts)
    assert "".join(tokenize(text)) == text


def test_rounds_never_overshoot_and_acceptance_is_prefix_closed() -> None:
    config = SimConfig(spec_tokens=4, acceptance=(1.0, 1.0, 0.0), jitter=0.0, ms_per_round=2, ms_per_draft_token=0.5)
    drafter = Drafter(config, 42, "prompt")
    step = drafter.next_round(remaining=100)
    assert (step.proposed, step.accepted) == (4, 2)  # position 2 always rejected, so 3 is never reached
    assert step.seconds == (2 + 0.5 * 4) / 1000
    step = drafter.next_round(remaining=2)
    assert step.proposed == 1 and step.accepted == 1  # never proposes past the last token
    assert drafter.next_round(remaining=1).proposed == 0


def test_same_request_same_draws_on_every_start() -> None:
    config = SimConfig(spec_tokens=3, acceptance=(0.5,), jitter=0.1)

    def rounds(seed: int) -> list[object]:
        drafter = Drafter(config, seed, "p")
        return [drafter.next_round(50) for _ in range(20)]

    assert rounds(7) == rounds(7)  # twenty rounds in a row: proposals, acceptances and times
    assert rounds(8) != rounds(7)
