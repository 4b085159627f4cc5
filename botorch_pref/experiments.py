"""Lockstep PBO replications (a thin entry point; the code lives in :mod:`botorch_pref.loop`)."""

from botorch_pref.loop.replications import (
    BATCHED_STRATEGIES,
    REGRET_FLOOR,
    ReplicationResults,
    log10_regret,
    run_replications,
)

__all__ = [
    "BATCHED_STRATEGIES",
    "REGRET_FLOOR",
    "ReplicationResults",
    "log10_regret",
    "run_replications",
]
