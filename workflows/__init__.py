"""Temporal workflows: deterministic drivers of the pure state machine in `settled.domain.machine`."""
