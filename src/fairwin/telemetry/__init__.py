"""GPU telemetry: what the hardware did during each start (clocks, dial-backs, compute processes)."""
