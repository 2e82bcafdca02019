"""`fairwin sim`: the reference server, with its faults."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from fairwin.cli._arguments import non_negative, positive
from fairwin.errors import UsageError

if TYPE_CHECKING:
    from fairwin.cli._arguments import Commands


def add_parsers(commands: Commands) -> None:
    parser = commands.add_parser("sim", help="run the reference server (OpenAI-compatible, vLLM's metrics)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default="sim", help="served model name")
    parser.add_argument("--spec-tokens", type=int, default=0, help="draft tokens per round; 0 turns speculation off")
    parser.add_argument("--acceptance", default="", help="acceptance probability by position, e.g. 0.8,0.6,0.4")
    parser.add_argument("--draft-probability", type=non_negative, default=1.0, help="chance a round proposes at all")
    parser.add_argument("--ms-per-round", type=positive, default=5.0, help="decode round cost")
    parser.add_argument("--ms-per-draft-token", type=non_negative, default=0.0, help="extra cost per proposed token")
    parser.add_argument("--prefill-ms-per-token", type=non_negative, default=0.01)
    parser.add_argument("--jitter", type=non_negative, default=0.02, help="relative s.d. of each round's time")
    parser.add_argument(
        "--eos-token-id",
        type=int,
        default=2,
        help="the end-of-sequence token: allowed_token_ids = [it] ends a stream at once",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--clock",
        choices=("model", "wall"),
        default="model",
        help="what the counters and per-request timing report: the modelled seconds, whatever the machine's load "
        "(model, the default: verdicts on the counters cannot be moved by CPU starvation), or the seconds the "
        "server's own clock saw (wall, as a real server reports)",
    )
    parser.add_argument("--fault", action="append", default=[], help="inject a fault (repeatable): see docs")
    parser.add_argument(
        "--api-key", help="answer 401 to /v1 requests without `Authorization: Bearer KEY` (default: $VLLM_API_KEY)"
    )
    parser.add_argument("--reject-param", action="append", default=[], help="answer 400 to requests with this key")
    parser.add_argument(
        "--per-request-metrics",
        action="store_true",
        help="put vLLM's per-request timing (`metrics`) on every usage chunk, as --enable-per-request-metrics does",
    )
    parser.set_defaults(func=sim)


def sim(args: argparse.Namespace) -> int:
    if "aiohttp" not in sys.modules:
        # The sim serves plain HTTP and opens no connection of its own, TLS or not; aiohttp builds two TLS contexts
        # as it is imported, each loading a CA bundle (about 45 of a sim's 270 ms of CPU to start). Here they
        # load an empty one. A process that already imported aiohttp (a caller of main()) keeps its own.
        os.environ["SSL_CERT_FILE"] = os.devnull
    from fairwin.sim.app import FAULTS, serve
    from fairwin.sim.model import SimConfig

    unknown = sorted(set(args.fault) - FAULTS.keys())
    if unknown:
        raise UsageError(f"unknown --fault {', '.join(unknown)}; choose from {', '.join(FAULTS)}")
    acceptance = tuple(float(x) for x in args.acceptance.split(",")) if args.acceptance else ()
    if any(not 0 <= a <= 1 for a in acceptance):
        raise UsageError("--acceptance values must lie in [0, 1], e.g. 0.8,0.6,0.4")
    config = SimConfig(
        model=args.model,
        spec_tokens=args.spec_tokens,
        acceptance=acceptance,
        draft_probability=args.draft_probability,
        ms_per_round=args.ms_per_round,
        ms_per_draft_token=args.ms_per_draft_token,
        prefill_ms_per_token=args.prefill_ms_per_token,
        jitter=args.jitter,
        seed=args.seed,
        faults=frozenset(args.fault),
        reject_params=frozenset(args.reject_param),
        per_request_metrics=args.per_request_metrics,
        clock=args.clock,
        eos_token_id=args.eos_token_id,
        api_key=args.api_key or os.environ.get("VLLM_API_KEY") or None,
    )
    serve(config, args.host, args.port)
    return 0
