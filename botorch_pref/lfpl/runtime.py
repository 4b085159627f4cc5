"""Thread defaults for LFPL training, applied by the package's entry points.

Why: torch's CPU build runs its intra-op parallelism on GNU OpenMP, whose idle worker threads
busy-wait ("spin") after each parallel region unless ``OMP_WAIT_POLICY=PASSIVE`` was set before
the OpenMP runtime started -- that is, before ``torch`` was imported; setting the variable later
has no effect. LFPL/IF training runs thousands of small kernels; on a machine whose cores are
shared with other processes the spinning threads compete with the thread doing the work, and a
fit takes several times longer. ``botorch_pref`` imports torch on import, so by the time an entry
point runs the variable can no longer be set. What works at that point is not to start an
OpenMP team at all: with one intra-op thread every kernel runs inline on the calling thread.
On the 2-core machine where this was measured, one thread was as fast as or faster than two
threads even with ``OMP_WAIT_POLICY=PASSIVE`` (the kernels are too small to split), and many
times faster than two spinning threads under load (``benchmarks/RESULTS-lfpl.md``).

:func:`lfpl_threads` is that default as a context manager, restoring torch's setting on exit.
It leaves the setting alone when the user chose one: ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS``
in the environment, ``OMP_WAIT_POLICY=PASSIVE``, or an explicit ``threads``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["default_lfpl_threads", "lfpl_threads"]

USER_SETTINGS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def default_lfpl_threads(device: torch.device | str | None = None) -> int | None:
    """The intra-op thread count LFPL training should use, or ``None`` to leave torch's.

    Args:
        device: The training device; only CPU training is affected.

    Returns:
        ``1`` on CPU unless the user set a thread count or a passive wait policy in the
        environment; ``None`` otherwise.
    """
    if device is not None and torch.device(device).type != "cpu":
        return None
    if any(os.environ.get(name) for name in USER_SETTINGS):
        return None
    if os.environ.get("OMP_WAIT_POLICY", "").strip().upper() == "PASSIVE":
        return None
    return 1


@contextmanager
def lfpl_threads(
    threads: int | str | None = "auto", device: torch.device | str | None = None
) -> Iterator[int]:
    """Run a block with LFPL's thread default, restoring torch's thread count afterwards.

    Args:
        threads: ``"auto"`` (:func:`default_lfpl_threads`), a positive number of threads, or
            ``None`` to leave torch's setting alone.
        device: The training device (``"auto"`` changes nothing off the CPU).

    Yields:
        The intra-op thread count in effect inside the block.
    """
    if threads == "auto":
        threads = default_lfpl_threads(device)
    elif threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int):
            raise TypeError(f"threads must be 'auto', None or an int, got {threads!r}.")
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}.")
    previous = torch.get_num_threads()
    if threads is None or threads == previous:
        yield previous
        return
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(previous)
