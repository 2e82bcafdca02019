"""The server's own counters: Prometheus scrapes and their deltas."""
