"""Server profiles: which of a server's own Prometheus counters fairwin reads, by name.

fairwin pools the counters of **vLLM** (``vllm:`` metrics, the V1 engine's names) and of **llama.cpp**'s
``llama-server --metrics`` (``llamacpp:``). Any other OpenAI-compatible server runs with the ``none``
profile: no counters are read, every metric comes from fairwin's client, and the plan must choose a rule
whose metrics the client measures (``win2-alt7-client-v1``). ``window.counters = "auto"`` chooses the
profile at the first start from what its server's ``/metrics`` exports (:func:`detect`).

Where an engine counts differently from vLLM, its profile says so and pooling follows it:

- llama.cpp has no finished-request counter, and a request enters its counters only when its slot is
  released. So a repeat's first tokens are its own finished streams, and a wave is settled when every
  ``busy`` gauge (``requests_processing``, ``requests_deferred``) reads 0: then every stream it sent has
  been counted. Its prompt cache is per slot and on by default; ``request_fields`` turns it off for
  fairwin's requests, as the cache salt keeps vLLM's prefix cache apart.
- llama.cpp's ``n_decode_total`` counts batched ``llama_decode()`` calls (one call serves every busy slot,
  and prompts are decoded too), not each request's decode steps; rounds are computed as for vLLM.

SGLang exports ``sglang:`` series, but its acceptance data are gauges (``sglang:spec_accept_length``,
``sglang:spec_accept_rate``), not counters a wave's delta can pool, and it has no per-request decode
seconds; it runs client-only until a profile is built from its real output (docs/pooling.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue

ProfileName = Literal["vllm", "llamacpp", "none"]
#: What a plan may ask for: a profile by name, or the one the first start's server exports.
CountersSetting = Literal["vllm", "llamacpp", "none", "auto"]
TokenizeStyle = Literal["vllm", "llamacpp"]


@dataclass(frozen=True)
class ServerProfile:
    """The counter names pooling reads; ``prefix`` None means the server's counters are not read."""

    name: ProfileName
    prefix: str | None = None
    generation: str = ""  # every token generated, each request's first included
    decode_sum: str = ""  # per-request decode seconds (after the first token), summed
    requests: str = ""  # finished requests (one first token each); "" where the server has no such counter
    drafts: str = ""
    draft_tokens: str = ""
    accepted: str = ""
    prefix_queries: str = ""
    prefix_hits: str = ""
    #: Gauges that read 0 once every request sent has been counted (where there is no request counter).
    busy: tuple[str, ...] = ()
    #: A series only this engine exports: what ``auto`` recognises it by.
    signature: str = ""
    #: Fields added to every request fairwin sends this server.
    request_fields: Mapping[str, JsonValue] = field(default_factory=dict)
    tokenize: TokenizeStyle = "vllm"

    def body_fields(self, cell_extra: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        """What a request adds to the standard body: this profile's fields, then the cell's own (which win)."""
        return {**self.request_fields, **cell_extra}

    @property
    def reads_counters(self) -> bool:
        return self.prefix is not None

    @property
    def counts_requests(self) -> bool:
        """Whether the server counts finished requests; if not, a wave's own finished streams stand in."""
        return bool(self.requests)

    @property
    def required(self) -> tuple[str, ...]:
        """Counters a repeat cannot be pooled without."""
        if not self.reads_counters:
            return ()
        return tuple(name for name in (self.generation, self.decode_sum, self.requests) if name)


VLLM = ServerProfile(
    name="vllm",
    prefix="vllm:",
    generation="vllm:generation_tokens_total",
    decode_sum="vllm:request_decode_time_seconds_sum",
    requests="vllm:request_decode_time_seconds_count",
    drafts="vllm:spec_decode_num_drafts_total",
    draft_tokens="vllm:spec_decode_num_draft_tokens_total",
    accepted="vllm:spec_decode_num_accepted_tokens_total",
    prefix_queries="vllm:prefix_cache_queries_total",
    prefix_hits="vllm:prefix_cache_hits_total",
    signature="vllm:generation_tokens_total",
)
LLAMACPP = ServerProfile(
    name="llamacpp",
    prefix="llamacpp:",
    generation="llamacpp:tokens_predicted_total",
    decode_sum="llamacpp:tokens_predicted_seconds_total",
    drafts="llamacpp:spec_decode_num_drafts_total",  # verification steps
    draft_tokens="llamacpp:spec_decode_num_draft_tokens_total",
    accepted="llamacpp:spec_decode_num_accepted_tokens_total",
    prefix_hits="llamacpp:prompt_tokens_cached_total",
    busy=("llamacpp:requests_processing", "llamacpp:requests_deferred"),
    signature="llamacpp:tokens_predicted_total",
    request_fields={"cache_prompt": False},
    tokenize="llamacpp",
)
CLIENT_ONLY = ServerProfile(name="none")

PROFILES: dict[str, ServerProfile] = {p.name: p for p in (VLLM, LLAMACPP, CLIENT_ONLY)}
#: The profiles ``auto`` can find, in the order it tries them.
DETECTABLE = (VLLM, LLAMACPP)


def exported(series: set[str]) -> list[ServerProfile]:
    """Every profile whose signature is among ``series`` (every sample name on a /metrics), in the order ``auto``
    tries them (a proxy may export more than one)."""
    return [p for p in DETECTABLE if p.signature in series]


def detect(series: set[str]) -> ServerProfile:
    """The profile ``auto`` takes: the first one exported; the client-only profile when none is."""
    return next(iter(exported(series)), CLIENT_ONLY)
