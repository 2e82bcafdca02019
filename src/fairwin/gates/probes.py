"""The rehearsal's probes: one per request shape a window sends, and how each reply is read.

A probe carries the window's own parameters but at most ``MAX_PROBE_TOKENS`` generated
tokens; control probes with an expected status prove the rehearsal sees the failure it
exists to catch (gates/rehearsal.py writes the receipt).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
from pydantic import ConfigDict, JsonValue

from fairwin.client.completions import PATH as GREEDY_PATH
from fairwin.client.completions import parse, request
from fairwin.client.prepare import PreparedPrompt, TokenizeClient, prepare
from fairwin.client.stream import StreamRecord, request_body, sse_payload
from fairwin.client.wave import endpoint_path
from fairwin.errors import InputError
from fairwin.files import canonical_json
from fairwin.plan.loading import LoadedPlan
from fairwin.plan.schedule import waves_for
from fairwin.profiles import PROFILES, VLLM, ServerProfile
from fairwin.records import SparseModel

MAX_PROBE_TOKENS = 8
#: A server's count of a prompt may exceed the prompt's own tokens by its BOS (and a chat template's few).
BOS_SLACK = 8
PROBE_TEXT = "The rehearsal sends a short prompt with the window's own parameters."
READING_4XX = "4xx: the probe is wrong for this server; fix the request shape before any window"
READING_NO_ANSWER = "no answer (transport error or 5xx): the server did not answer; run the rehearsal again"


@dataclass(frozen=True)
class Probe:
    name: str
    method: str
    path: str
    body: dict[str, JsonValue] | None
    stream: bool = False
    expect_status: int | None = None  # control probes only
    expect_tokens: int | None = None
    expect_logprobs: bool = False  # the greedy diagnostics' answer: completions logprobs, top two
    expect_finish: str | None = None  # the terminator probe: "stop", on the forced end-of-sequence token
    expect_prompt_tokens: tuple[int, int] | None = None  # a real prompt's: the server's count within this range


def _stream_body(
    loaded: LoadedPlan,
    profile: ServerProfile,
    cell_name: str,
    model: str,
    max_tokens: int,
    salt: str,
    text: str = PROBE_TEXT,
) -> dict[str, JsonValue]:
    cell = loaded.plan.cells[cell_name]
    record = StreamRecord(
        start="rehearsal",
        role="production",
        cell=cell_name,
        wave="rehearsal",
        repeat=0,
        family="rehearsal",
        stream=0,
        prompt_id="rehearsal",
        prompt_tokens_expected=0,
        seed=loaded.plan.window.base_seed,
        cache_salt=salt,
        endpoint=cell.endpoint,
        max_tokens=max_tokens,
    )
    return request_body(record, model, text, cell.temperature, cell.top_p, profile.body_fields(cell.extra_body))


def probes_for(
    loaded: LoadedPlan,
    model: str,
    eos: int | None = None,
    real: dict[str, PreparedPrompt] | None = None,
    profile: ServerProfile | None = None,
) -> list[Probe]:
    """One probe per distinct request shape of the window, the terminator probe when the model's end-of-sequence
    token is known (``eos``, else the plan's rehearsal.eos_token_id), then the control probes. ``real``: a cell's
    real prompt, cut to its length, which its probe sends instead of the short text."""
    if profile is None:  # the plan's named profile (the rehearsal passes the one production's /metrics exports)
        profile = PROFILES.get(loaded.plan.window.counters, VLLM)
    shapes = _Shapes(loaded, profile, model, f"rehearsal-{int(time.time())}")
    terminator = eos if eos is not None else loaded.plan.rehearsal.eos_token_id
    return [
        *_reading_probes(loaded, profile, model),
        shapes.warmup(),
        *shapes.cells(real or {}),
        *shapes.greedy(),
        *shapes.terminator(terminator),
        *shapes.controls(),
    ]


def _reading_probes(loaded: LoadedPlan, profile: ServerProfile, model: str) -> list[Probe]:
    """The paths a window reads besides its streams: health, the counters (if read), /tokenize per endpoint."""
    plan = loaded.plan
    probes = [Probe("health", "GET", "/health", None)]
    if profile.reads_counters:  # a client-only window never reads /metrics
        probes.append(Probe("metrics", "GET", "/metrics", None))
    for endpoint in sorted({cell.endpoint for cell in plan.cells.values()}):
        body: dict[str, JsonValue] = {"model": model}
        if profile.tokenize == "llamacpp":  # a chat is rendered by /apply-template first (client/prepare.py)
            body = {"content": PROBE_TEXT, "add_special": True}
        elif endpoint == "chat":
            body.update({"messages": [{"role": "user", "content": PROBE_TEXT}], "add_generation_prompt": True})
        else:
            body["prompt"] = PROBE_TEXT
        probes.append(Probe(f"tokenize-{endpoint}", "POST", "/tokenize", body))
    return probes


@dataclass(frozen=True)
class _Shapes:
    """The streamed request shapes a window sends, each as a tiny probe under a cache salt of its own."""

    loaded: LoadedPlan
    profile: ServerProfile
    model: str
    stamp: str

    @property
    def tokens(self) -> int:
        return min(MAX_PROBE_TOKENS, self.loaded.plan.window.warmup_max_tokens)

    @property
    def warm(self) -> str:
        return self.loaded.plan.first_decision_cell

    def priced(self, body: dict[str, JsonValue]) -> dict[str, JsonValue]:
        priority = self.loaded.plan.rehearsal.priority
        return body if priority is False else {**body, "priority": priority}

    def _body(self, cell: str, tokens: int, salt: str, text: str = PROBE_TEXT) -> dict[str, JsonValue]:
        return _stream_body(self.loaded, self.profile, cell, self.model, tokens, f"{self.stamp}.{salt}", text)

    def warmup(self) -> Probe:
        path = endpoint_path(self.loaded.plan.cells[self.warm])
        body = self.priced(self._body(self.warm, self.tokens, "warmup"))
        return Probe("warmup", "POST", path, body, True, expect_tokens=self.tokens)

    def cells(self, real: dict[str, PreparedPrompt]) -> list[Probe]:
        probes = []
        for name, cell in self.loaded.plan.cells.items():
            n = min(MAX_PROBE_TOKENS, cell.max_tokens)
            prompt = real.get(name)
            low, high = cell.prompt_tokens - cell.prompt_tokens_tolerance, cell.prompt_tokens + BOS_SLACK
            body = self.priced(self._body(name, n, name, prompt.text if prompt is not None else PROBE_TEXT))
            expected = (low, high) if prompt else None
            probes.append(
                Probe(
                    f"cell {name}",
                    "POST",
                    endpoint_path(cell),
                    body,
                    True,
                    expect_tokens=n,
                    expect_prompt_tokens=expected,
                )
            )
        return probes

    def greedy(self) -> list[Probe]:
        if (greedy := self.loaded.plan.diagnostics.greedy) is None:
            return []
        body = request(self.model, PROBE_TEXT, min(MAX_PROBE_TOKENS, greedy.max_tokens), f"{self.stamp}.greedy")
        return [Probe("greedy diagnostics", "POST", GREEDY_PATH, self.priced(body), expect_logprobs=True)]

    def terminator(self, token: int | None) -> list[Probe]:
        """The runbook's terminator probe, forced with allowed_token_ids: vLLM refuses logit_bias whenever
        speculative decoding is on, which is what the default control probe proves."""
        if token is None:
            return []
        body: dict[str, JsonValue] = {
            **self._body(self.warm, self.tokens, "eos"),
            "ignore_eos": False,
            "allowed_token_ids": [token],
        }
        path = endpoint_path(self.loaded.plan.cells[self.warm])
        return [Probe("eos", "POST", path, self.priced(body), True, expect_tokens=1, expect_finish="stop")]

    def controls(self) -> list[Probe]:
        path = endpoint_path(self.loaded.plan.cells[self.warm])
        probes = []
        for control in self.loaded.plan.rehearsal.controls:
            body = self.priced(self._body(self.warm, self.tokens, f"control.{control.name}"))
            probes.append(
                Probe(
                    f"control {control.name}",
                    "POST",
                    path,
                    {**body, **control.body},
                    True,
                    expect_status=control.expect_status,
                )
            )
        return probes


async def real_prompts(
    loaded: LoadedPlan, profile: ServerProfile, session: aiohttp.ClientSession, url: str, model: str
) -> dict[str, PreparedPrompt]:
    """Each cell's first prompt cut to the cell's length with production's own /tokenize, as a window's first
    start cuts it: a 32K cell is rehearsed at 32K (still at most 8 generated tokens)."""
    found = {}
    for name, cell in loaded.plan.cells.items():
        wave = waves_for(loaded, name)[0]
        tokenizer = TokenizeClient(session, url, model, cell.endpoint, profile.tokenize)
        found[name] = await prepare(
            tokenizer, name, wave.family, wave.prompts[0], cell.prompt_tokens, cell.prompt_tokens_tolerance
        )
    return found


def _digest(data: str | bytes) -> str:
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode("utf-8")).hexdigest()


def _stream_facts(text: str) -> dict[str, Any]:
    """finish_reason, usage, [DONE], and an error event: vLLM reports some refusals of a streaming
    request (logit_bias under speculation) as HTTP 200 with a ``data: {"error": {..., "code": 400}}`` event."""
    finish = stop = usage = error = None
    done = False
    for line in text.splitlines():
        data = sse_payload(line)
        if data is None:
            continue
        if data == "[DONE]":
            done = True
            continue
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError:
            continue
        if isinstance(chunk.get("error"), dict):
            error = chunk["error"]
        for choice in chunk.get("choices") or []:
            finish = choice.get("finish_reason") or finish
            stop = choice.get("stop_reason", stop) if choice.get("finish_reason") else stop
        usage = chunk.get("usage") or usage
    return {"finish_reason": finish, "stop_reason": stop, "usage": usage, "done": done, "stream_error": error}


class ProbeResult(SparseModel):
    """One probe as sent and answered: only what happened is set (a probe no server answered has its error; a
    stream its finish and usage), and only that is stored in rehearsal.json."""

    model_config = ConfigDict(extra="forbid")

    name: str
    path: str
    request_sha256: str
    status: int | None = None  # the effective status: a stream's error event's code over its HTTP 200
    http_status: int | None = None
    error: str | None = None
    response_sha256: str | None = None
    error_body: str | None = None
    logprobs_problem: str | None = None
    finish_reason: str | None = None
    stop_reason: Any = None  # the server's own (a token id or a string)
    usage: dict[str, JsonValue] | None = None  # the server's usage object, as it sent it
    done: bool | None = None
    reading: str | None = None  # the judgement: None when the probe did what it should
    ok: bool | None = None


async def send(session: aiohttp.ClientSession, url: str, probe: Probe) -> tuple[ProbeResult, str]:
    """The probe's result, and the body as answered (kept beside the receipt, in responses.jsonl, never in it)."""
    request = canonical_json({"method": probe.method, "path": probe.path, "body": probe.body})
    result = ProbeResult(name=probe.name, path=probe.path, request_sha256=_digest(request))
    try:
        async with session.request(probe.method, url + probe.path, json=probe.body) as response:
            text = await response.text()
            status = response.status
    except (TimeoutError, aiohttp.ClientError) as exc:
        result.status, result.error, result.response_sha256 = None, str(exc) or type(exc).__name__, None
        return result, ""
    result.status, result.response_sha256, result.http_status = status, _digest(text), status
    if status >= 300:
        result.error_body = text[:2000]
    elif probe.expect_logprobs:
        result.logprobs_problem = _logprobs_problem(text, probe.name)
    elif probe.stream:
        facts = _stream_facts(text)
        error = facts.pop("stream_error")
        for key, value in facts.items():
            setattr(result, key, value)
        if error is not None:
            # The effective status is the error event's code: a 200 that carries a refusal is a refusal.
            code = error.get("code")
            result.status = code if isinstance(code, int) and 100 <= code <= 599 else 500
            result.error_body = json.dumps({"error": error})[:2000]
    return result, text


def _logprobs_problem(text: str, name: str) -> str | None:
    """Why an answer cannot feed the greedy diagnostics (no completions logprobs); None when it can."""
    try:
        tokens, top = parse(json.loads(text), name)
    except (InputError, ValueError) as exc:
        return str(exc)
    return None if tokens and len(top) == len(tokens) else f"{name}: the answer's logprobs have no top tokens"


def judge(probe: Probe, result: ProbeResult) -> str | None:
    """None when the probe did what it should; else the reading of its failure."""
    status = result.status
    if probe.expect_status is not None:
        if status == probe.expect_status:
            return None
        if status is None or status >= 500:
            return READING_NO_ANSWER
        return (
            f"control probe expected HTTP {probe.expect_status} and got {status}: the rehearsal cannot see this failure"
        )
    if status is None or status >= 500:
        return READING_NO_ANSWER
    if status >= 400:
        return READING_4XX
    if probe.expect_logprobs and result.logprobs_problem:
        return f"4xx-like: {result.logprobs_problem}"
    if probe.expect_finish is not None and result.finish_reason != probe.expect_finish:
        return (
            f"4xx-like: the terminator probe ended with finish_reason {result.finish_reason!r}, not "
            f"{probe.expect_finish!r}: the server did not end on the forced token (is --eos the model's "
            "end-of-sequence id?)"
        )
    if probe.stream:
        usage = result.usage or {}
        if probe.expect_prompt_tokens is not None:
            low, high = probe.expect_prompt_tokens
            counted = usage.get("prompt_tokens")
            if not isinstance(counted, int) or not low <= counted <= high:
                return (
                    f"4xx-like: the server counted {usage.get('prompt_tokens')} prompt tokens of the cell's "
                    f"real prompt, not {low} to {high}"
                )
        if not result.done or usage.get("completion_tokens") != probe.expect_tokens:
            return (
                f"4xx-like: the stream did not end with [DONE] and exactly {probe.expect_tokens} tokens "
                f"(got {usage.get('completion_tokens')}); the server ignores ignore_eos or include_usage"
            )
    return None
