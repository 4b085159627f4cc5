"""Lockstep PBO replications (a thin entry point; the code lives in :mod:`botorch_pref.loop`).

It re-exports the public names of :mod:`botorch_pref.loop.replications` (its ``__all__``).
"""

from botorch_pref.loop import replications as _replications
from botorch_pref.loop.replications import *  # noqa: F403  (exactly the names of its __all__)

__all__ = list(_replications.__all__)
