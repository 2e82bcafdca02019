"""The API rehearsal: every request shape a window will send, tried tiny against production first.

A window can be lost to a request the server refuses (vLLM answers 400 to
``logit_bias`` whenever speculative decoding is on). So before a window is queued,
one probe per distinct request shape (every cell's stream, the warm-up, /tokenize,
/metrics when the window reads counters, /health) is sent with the window's own parameters except at most
``MAX_PROBE_TOKENS`` generated tokens, back to back. Control probes with an expected
status prove the rehearsal can see the failure it exists to catch: by default one
that carries ``logit_bias`` and must come back 400 (``cause_confirmed``).

Every reply is kept in ``responses.jsonl`` (mode 0600); ``rehearsal.json`` holds
the verdict and, per probe, its status, the server's error body, finish reason,
usage and the sha256 of request and response. Secrets sent as headers are never
written anywhere.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import ClassVar, Literal

import aiohttp
from pydantic import ConfigDict

from fairwin.errors import InputError
from fairwin.files import write_text_atomic
from fairwin.formats import REHEARSAL, RecordFormat
from fairwin.gates.binding import bind, moved, rehearsal_parts
from fairwin.gates.probes import ProbeResult, judge, probes_for, real_prompts, send
from fairwin.gates.receipt import Receipt, read_receipt, write_receipt
from fairwin.gates.refusal import refuse
from fairwin.metrics.profile import choose_profile
from fairwin.plan.loading import LoadedPlan
from fairwin.transport import api_headers


class RehearsalRecord(Receipt):
    """``fairwin.rehearsal/2`` (``rehearsal.json``): the verdict, each probe's reading, and what it vouches for
    (``binds``: each field of the plan its probes were built from; /1 bound the whole plan's sha256)."""

    record_format: ClassVar[RecordFormat] = REHEARSAL
    model_config = ConfigDict(extra="forbid")

    format: Literal["fairwin.rehearsal/1", "fairwin.rehearsal/2"] = "fairwin.rehearsal/2"
    verdict: Literal["PASS", "FAIL"]
    cause_confirmed: bool
    url: str
    model: str
    plan_path: str
    plan_sha256: str  # the effective plan's, for the record; /2 is checked on `binds`
    binds: dict[str, str] | None = None  # a field's dotted path -> the sha256 of its value (None in /1)
    created_unix: float
    headers_sent: list[str]  # names only: values may be secrets
    failures: list[str]
    probes: list[ProbeResult]


async def rehearse(
    loaded: LoadedPlan, url: str, out: Path, *, model: str, headers: dict[str, str], eos: int | None = None
) -> RehearsalRecord:
    if out.exists():
        raise InputError(f"{out} already exists; a rehearsal never overwrites one")
    base = url.rstrip("/")
    timeout = aiohttp.ClientTimeout(total=loaded.plan.window.request_timeout_s)
    results: list[ProbeResult] = []
    replies: list[str] = []
    async with aiohttp.ClientSession(timeout=timeout, headers=headers) as session:
        # The profile production's /metrics exports (or the one the plan names, proved there), then the prompts
        # cut: before anything is written, so a refusal leaves no half-made rehearsal behind.
        profile = (await choose_profile(session, base, loaded.plan.window.counters, None, "production")).profile
        real = await real_prompts(loaded, profile, session, base, model) if loaded.plan.rehearsal.real_prompts else None
        try:
            out.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            raise InputError(f"{out} already exists; a rehearsal never overwrites one") from None
        except OSError as exc:
            raise InputError(f"cannot create {out}: {exc.strerror}") from None
        probes = probes_for(loaded, model, eos, real, profile)
        for probe in probes:  # back to back, no idle wait
            result, reply = await send(session, base, probe)
            results.append(result)
            replies.append(reply)
    # The requests as sent (their bodies; never a header) beside the replies.
    lines = [
        {"name": r.name, "request": probe.body, "status": r.status, "reply": reply}
        for probe, r, reply in zip(probes, results, replies, strict=True)
    ]
    write_text_atomic(out / "responses.jsonl", "".join(json.dumps(line) + "\n" for line in lines), mode=0o600)
    failures = []
    for probe, result in zip(probes, results, strict=True):
        result.reading = judge(probe, result)
        result.ok = result.reading is None
        if not result.ok:
            failures.append(f"{probe.name}: {result.reading}")
    controls = [r for p, r in zip(probes, results, strict=True) if p.expect_status is not None]
    cause_confirmed = bool(controls) and all(r.ok for r in controls)
    document = RehearsalRecord(
        verdict="PASS" if not failures and cause_confirmed else "FAIL",
        cause_confirmed=cause_confirmed,
        url=url.rstrip("/"),
        model=model,
        plan_path=str(loaded.path),
        plan_sha256=loaded.sha256,
        binds=bind(rehearsal_parts(loaded)),
        created_unix=time.time(),
        headers_sent=sorted(headers),
        failures=failures,
        probes=results,
    )
    return write_receipt(out / "rehearsal.json", document)


def rehearsal_problems(directory: Path, document: RehearsalRecord, loaded: LoadedPlan) -> list[str]:
    """Why the rehearsal in ``directory`` does not admit this plan's window: not PASS, against another URL, for
    another plan or for what changed since, or too old ([] when it admits)."""
    settings = loaded.plan.rehearsal
    if document.verdict != "PASS":
        return [f"rehearsal {directory} is {document.verdict}, not PASS: {document.failures}"]
    if settings.url is None:
        return ["--require-rehearsal needs the plan's rehearsal.url (production's URL) to compare with"]
    if document.url != settings.url.rstrip("/"):
        return [f"rehearsal {directory} was against {document.url}, the plan's is {settings.url}"]
    if document.binds is None and document.plan_sha256 != loaded.sha256:
        return [f"rehearsal {directory} was for another version of the plan (sha256 differs); rehearse again"]
    changed = moved(document.binds or {}, bind(rehearsal_parts(loaded)))
    if document.binds is not None and changed:
        return [
            f"rehearsal {directory} vouches for what changed since: {', '.join(changed[:3])}; rehearse again",
            *(f"{key} changed since the rehearsal too" for key in changed[3:]),
        ]
    age_h = (time.time() - document.created_unix) / 3600.0
    if age_h > settings.max_age_h:
        return [f"rehearsal {directory} is {age_h:.1f} h old, older than {settings.max_age_h:g} h; rehearse again"]
    return []


def require_rehearsal(directory: Path, loaded: LoadedPlan) -> RehearsalRecord:
    """The rehearsal's receipt, refused (exit 4) unless it admits this plan's window."""
    document = read_receipt(directory / "rehearsal.json", RehearsalRecord)
    refuse("rehearsal", rehearsal_problems(directory, document, loaded))
    return document


def _key_env(loaded: LoadedPlan, given: str | None) -> tuple[str | None, str]:
    """Which variable holds production's key: --api-key-env, else rehearsal's, else production's own."""
    production = loaded.plan.production
    role = loaded.plan.roles.get(production.role) if production and production.role else None
    for name, where in (
        (given, "--api-key-env"),
        (loaded.plan.rehearsal.api_key_env, "rehearsal.api_key_env"),
        (production.api_key_env if production else None, "production.api_key_env"),
        (role.api_key_env if role else None, "the production role's api_key_env"),
    ):
        if name is not None:
            return name, where
    return None, ""


def run_rehearsal(
    loaded: LoadedPlan, url: str | None, out: Path, model: str | None, api_key_env: str | None, eos: int | None = None
) -> RehearsalRecord:
    target = url or loaded.plan.rehearsal.url
    if target is None:
        raise InputError("no URL: pass --url or set rehearsal.url in the plan")
    name = model or loaded.plan.rehearsal.model or next(iter(loaded.plan.roles.values())).served_model
    headers = api_headers(*_key_env(loaded, api_key_env))
    return asyncio.run(rehearse(loaded, target, out, model=name, headers=headers, eos=eos))


__all__ = ["RehearsalRecord", "probes_for", "rehearse", "require_rehearsal", "run_rehearsal"]
