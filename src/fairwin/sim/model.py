"""The reference server's model of speculative decoding, and its vLLM-named counters.

A request is prefilled (``prefill_ms_per_token`` x prompt tokens, then the first
token), then decoded in rounds. Each round takes ``ms_per_round`` plus
``ms_per_draft_token`` per proposed token, with seeded jitter; when speculation is
on, a proposal is made with probability ``draft_probability`` and its position i is
accepted with ``acceptance[i]`` if every earlier position was. A round emits one
token plus the accepted drafts, exactly as vLLM's verification does, so the same
pooling arithmetic applies to the simulator and the real engine.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Histogram

TOKEN_RE = re.compile(r"\s*\S+|\s+")
GREEDY_FAULT_AT = 3  # the position the greedy faults bend (0-based)
WORDS = ("alpha", "beta", "gamma", "delta", "kappa", "lambda", "sigma", "omega", "theta", "zeta")
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def tokenize(text: str) -> list[str]:
    """A deterministic word-piece tokenizer: a prefix of a text never has more tokens than the text."""
    return TOKEN_RE.findall(text)


def token_id(piece: str, vocab: int = 32000) -> int:
    return int.from_bytes(hashlib.blake2b(piece.encode(), digest_size=4).digest(), "big") % vocab


@dataclass(frozen=True)
class SimConfig:
    model: str = "sim"
    spec_tokens: int = 0
    acceptance: tuple[float, ...] = ()
    draft_probability: float = 1.0
    ms_per_round: float = 5.0
    ms_per_draft_token: float = 0.0
    prefill_ms_per_token: float = 0.01
    jitter: float = 0.02
    seed: int = 0
    max_model_len: int = 65536
    faults: frozenset[str] = field(default_factory=frozenset)
    reject_params: frozenset[str] = field(default_factory=frozenset)
    per_request_metrics: bool = False
    # "model": the counters and per-request timing report the modelled seconds (prefill, each round's),
    # whatever the wall time was, so a machine starved of CPU cannot move what the server reports;
    # "wall": what the server's clock measured around its sleeps, as a real server reports.
    clock: Literal["model", "wall"] = "model"
    eos_token_id: int = 2  # what allowed_token_ids = [it] forces: the stream ends at once, finish_reason "stop"
    api_key: str | None = field(default=None, repr=False)  # /v1/* answers 401 without it, as vLLM's --api-key

    def acceptance_at(self, position: int) -> float:
        if position < len(self.acceptance):
            return self.acceptance[position]
        return self.acceptance[-1] if self.acceptance else 0.0


class SimMetrics:
    """vLLM's metric names, on a registry of the simulator's own."""

    def __init__(self, model: str, speculative: bool) -> None:
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"]
        self.labels = {"model_name": model, "engine": "0"}
        self.speculative = speculative

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, [*labels, *extra], registry=self.registry)

        def histogram(name: str, doc: str) -> Histogram:
            return Histogram(name, doc, labels, buckets=LATENCY_BUCKETS, registry=self.registry)

        self.prompt_tokens = counter("vllm:prompt_tokens", "Prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Generation tokens processed.")
        self.request_success = counter("vllm:request_success", "Finished requests.", ("finished_reason",))
        self.prefix_queries = counter("vllm:prefix_cache_queries", "Prefix cache queries, in tokens.")
        self.prefix_hits = counter("vllm:prefix_cache_hits", "Prefix cache hits, in tokens.")
        self.ttft = histogram("vllm:time_to_first_token_seconds", "Time to first token.")
        self.decode_time = histogram("vllm:request_decode_time_seconds", "Time in the decode phase.")
        if speculative:
            self.drafts = counter("vllm:spec_decode_num_drafts", "Drafts proposed.")
            self.draft_tokens = counter("vllm:spec_decode_num_draft_tokens", "Draft tokens proposed.")
            self.accepted = counter("vllm:spec_decode_num_accepted_tokens", "Draft tokens accepted.")
            self.accepted_per_pos = counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens by position.", ("position",)
            )
        self._expose_zeros()

    def _expose_zeros(self) -> None:
        """Like vLLM, show every unlabelled series at 0 before its first event."""
        series: list[Counter | Histogram] = [
            self.prompt_tokens,
            self.generation_tokens,
            self.prefix_queries,
            self.prefix_hits,
            self.ttft,
            self.decode_time,
        ]
        if self.speculative:
            series += [self.drafts, self.draft_tokens, self.accepted]
        for metric in series:
            metric.labels(**self.labels)


@dataclass
class Round:
    proposed: int
    accepted: int
    seconds: float


class Drafter:
    """Seeded per request: the same request (seed and prompt) sees the same draws on every start."""

    def __init__(self, config: SimConfig, request_seed: int, prompt: str, greedy: bool = False) -> None:
        material = f"{config.seed}:{request_seed}:{prompt}".encode()
        self.rng = random.Random(hashlib.sha256(material).digest())
        self.config = config
        # At temperature 0 the words depend on the prompt alone, as a model's greedy output does: never on
        # the seed, nor on how many drafts were accepted.
        self.greedy = random.Random(hashlib.sha256(prompt.encode()).digest()) if greedy else None
        self.words: list[str] = []
        self.top: list[list[tuple[str, float]]] = []  # per token: the top two (token, logprob), best first

    def next_round(self, remaining: int) -> Round:
        """One decode round that emits at most ``remaining`` tokens."""
        config = self.config
        proposed = accepted = 0
        if config.spec_tokens > 0 and remaining > 1 and self.rng.random() < config.draft_probability:
            # Like vLLM, never propose past the request's last token.
            proposed = min(config.spec_tokens, remaining - 1)
            while accepted < proposed and self.rng.random() < config.acceptance_at(accepted):
                accepted += 1
        base = config.ms_per_round + config.ms_per_draft_token * proposed
        noise = 1.0 + config.jitter * self.rng.gauss(0.0, 1.0)
        return Round(proposed=proposed, accepted=accepted, seconds=max(0.0, base * noise) / 1000.0)

    def text(self, tokens: int) -> str:
        start = len(self.words)
        for _ in range(tokens):
            drawn = self.rng.randrange(len(WORDS))  # drawn either way: the timing draws stay those of any request
            self._emit(self.greedy.randrange(len(WORDS)) if self.greedy is not None else drawn)
        return "".join(self.words[start:])

    def _emit(self, index: int) -> None:
        """One token and its top two; the greedy faults bend position GREEDY_FAULT_AT."""
        best, runner_up = " " + WORDS[index], " " + WORDS[(index + 1) % len(WORDS)]
        top = [(best, -0.05), (runner_up, -3.0)]
        if self.greedy is not None and len(self.words) == GREEDY_FAULT_AT:
            if "greedy-wrong-token" in self.config.faults:
                self.words.append(runner_up)  # a wrong token: the model itself ranks it far below the best
                self.top.append(top)
                return
            if "greedy-near-tie" in self.config.faults:
                best, runner_up = runner_up, best  # a numerical near-tie, which the other token wins
                top = [(best, -0.69), (runner_up, -0.70)]
        self.words.append(best)
        self.top.append(top)
