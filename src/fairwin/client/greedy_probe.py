"""Greedy diagnostics during a window: uncounted temperature-0 streams after a chosen start's waves.

After the waves of a diagnosed start (and before its server stops), the first
``prompts`` prepared prompts of each chosen cell are sent once more, not streamed, at
temperature 0 with EOS ignored and the top-2 logprobs of every position asked for,
each under a cache salt of its own. They are not counted: the waves' counters are
already read. Each answer goes to ``starts/sN/greedy.jsonl`` (``fairwin.greedy/1``);
the decide step compares them all (decision/divergence.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import aiohttp

from fairwin.client.completions import PATH, parse, request
from fairwin.client.prepare import PreparedPrompt
from fairwin.client.wave import Target, salt, server_counters
from fairwin.decision.divergence import GreedyFindings, GreedyStream, compare_greedy
from fairwin.directory.layout import GREEDY, WindowDir
from fairwin.metrics.scrape import delta
from fairwin.plan.diagnostics import GreedySettings
from fairwin.records import read_records, write_records
from fairwin.transport import post_json


async def diagnose(
    session: aiohttp.ClientSession,
    target: Target,
    window_id: str,
    settings: GreedySettings,
    prepared: dict[str, dict[str, PreparedPrompt]],
    cells: Sequence[str],
    window: WindowDir,
    speculative: bool,
) -> int:
    """Run the start's greedy streams and store them; how many were stored. A speculative start's rows say
    whether it really speculated meanwhile (its draft counter moved): some servers turn speculation off
    for requests that ask for logprobs, and then the comparison says nothing about speculative decoding."""
    rows: list[GreedyStream] = []
    url = f"{target.base_url}{PATH}"
    before = await server_counters(session, target)
    for cell in cells:
        for key, prompt in sorted(prepared.get(cell, {}).items())[: settings.prompts]:
            body = request(
                target.model, prompt.text, settings.max_tokens, salt(window_id, target.start, "greedy", len(rows))
            )
            answer = await post_json(session, url, body, what=f"greedy diagnostics of {target.start}")
            tokens, top = parse(answer, f"greedy diagnostics of {target.start}, {cell} {key}")
            rows.append(
                GreedyStream(
                    start=target.start,
                    kind=target.kind,
                    role=target.role,
                    cell=cell,
                    prompt=key,
                    tokens=tokens,
                    top=top,
                )
            )
    speculated = None
    if speculative and target.profile.reads_counters and target.profile.drafts:
        drafts = delta(before, await server_counters(session, target)).get(target.profile.drafts, 0.0)
        speculated = drafts > 0
    write_records(window.greedy(target.start), [row.model_copy(update={"speculated": speculated}) for row in rows])
    return len(rows)


def findings(window: WindowDir, settings: GreedySettings, base_dir: Path) -> GreedyFindings | None:
    """Every diagnosed start's streams, in start order, compared (decision/divergence.py); None if none ran."""
    files = window.start_files(GREEDY)
    if not files:
        return None
    streams = [stream for path in files for stream in read_records(path, GreedyStream)]
    reference: list[GreedyStream] = []
    if settings.reference is not None:
        path = settings.reference if settings.reference.is_absolute() else base_dir / settings.reference
        reference = read_records(path, GreedyStream)
    return compare_greedy(streams, settings.near_tie_margin, reference)
