"""The client: what a window sends and how each stream is timed from the client's side.

Prompts come from families pinned by their order files (``families``, ``order_import``), cut to each
cell's length by the server's own tokenizer (``prepare``, ``prompt_lengths``). A wave is one cell's streams
for one repeat and family, at the cell's concurrency (``wave``), each stream sent over one pooled transport
(``sse_transport``) and recorded chunk by chunk (``stream``, ``timeline``), with the kernel's account of how
long the client waited for a CPU (``runqueue``) so that a starved client is flagged, never trusted. The greedy
diagnostics' uncounted streams live here too (``greedy_probe``, ``completions``).
"""
