"""``fairwin sim``: an OpenAI-compatible reference server with vLLM's counters, for tests and fault injection.

``model`` is its model of speculative decoding (rounds, drafts, acceptance) and its counters; ``generation``
serves one request on a schedule of decode rounds; ``protocol`` holds what every endpoint shares (vLLM's
error bodies, request parsing); ``app`` wires the endpoints and the injected faults. It never stands in for
a real server where a user would run one.
"""
