"""Server profiles: which of a server's own Prometheus counters fairwin reads, by name.

fairwin pools the counters of **vLLM** (``vllm:`` metrics, any version with the V1
engine's names below). Any other OpenAI-compatible server (SGLang, TGI, llama.cpp's
server, a proxy) runs with the ``none`` profile: no counters are read, every metric
comes from fairwin's client, and the plan must choose a rule whose metrics the client
measures (``win2-alt7-client-v1``); the decision records that its primary came from
the client. SGLang exposes ``sglang:`` counters, but its decode-time and accepted-token
series are not the ones pooling needs (a gauge of the mean accept length, no per-request
decode seconds), so it runs client-only until a profile is built from its real output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ProfileName = Literal["vllm", "none"]


@dataclass(frozen=True)
class ServerProfile:
    """The counter names pooling reads; ``prefix`` None means the server's counters are not read."""

    name: ProfileName
    prefix: str | None = None
    generation: str = ""  # every token generated
    decode_sum: str = ""  # per-request decode seconds, summed
    requests: str = ""  # finished requests (one first token each): the histogram's count
    drafts: str = ""
    draft_tokens: str = ""
    accepted: str = ""
    prefix_queries: str = ""
    prefix_hits: str = ""

    @property
    def reads_counters(self) -> bool:
        return self.prefix is not None

    @property
    def required(self) -> tuple[str, ...]:
        """Counters a repeat cannot be pooled without."""
        return (self.generation, self.decode_sum, self.requests) if self.reads_counters else ()


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
)
CLIENT_ONLY = ServerProfile(name="none")

PROFILES: dict[str, ServerProfile] = {p.name: p for p in (VLLM, CLIENT_ONLY)}
