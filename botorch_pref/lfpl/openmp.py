"""Thread defaults for LFPL training, applied by the package's entry points.

Why: torch's CPU build runs its intra-op parallelism on GNU OpenMP, whose idle worker threads
busy-wait ("spin") after each parallel region unless ``OMP_WAIT_POLICY=PASSIVE`` was set before
the OpenMP runtime started -- that is, before ``torch`` was imported; setting the variable later
has no effect. LFPL/IF training runs thousands of small kernels; on a machine whose cores are
shared with other processes the spinning threads compete with the thread doing the work, and a
fit takes several times longer. ``botorch_pref`` imports torch on import, so by the time an entry
point runs the variable can no longer be set in the running process. Two defaults follow:

* the ``botorch-pref lfpl train | implicit | synthetic`` commands re-execute themselves once
  with ``OMP_WAIT_POLICY=PASSIVE`` (:func:`reexec_with_passive_openmp`), so torch starts its
  OpenMP runtime with sleeping idle threads and keeps its default thread count;
* inside a running process (the Python API: :func:`~botorch_pref.lfpl.implicit.fit_implicit`
  and :class:`~botorch_pref.lfpl.recommender.LFPLRecommender`) the wait policy is fixed, and
  the fits start no OpenMP team at all: with one intra-op thread every kernel runs inline.

Measured on the shared 2-core machine (``benchmarks/RESULTS-lfpl.md``, ``--part threads``): with
the defaults, two spinning threads took 275 s, one thread 11-12 s and two passive threads
7.6-7.8 s for the same fit. Both defaults stand aside when the user chose: ``OMP_NUM_THREADS``
or ``MKL_NUM_THREADS`` or ``OMP_WAIT_POLICY`` in the environment, or an explicit ``threads``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from botorch_pref.runtime import USER_SETTINGS, default_threads, entry_threads

__all__ = ["default_lfpl_threads", "lfpl_threads", "reexec_with_passive_openmp"]

#: LFPL's in-process thread default: :func:`botorch_pref.runtime.default_threads`.
default_lfpl_threads = default_threads
#: LFPL's in-process thread context: :func:`botorch_pref.runtime.entry_threads`.
lfpl_threads = entry_threads
REEXEC_MARKER = "BOTORCH_PREF_LFPL_REEXEC"


def reexec_with_passive_openmp(command: Sequence[str]) -> None:
    """Re-execute this ``botorch-pref`` process with ``OMP_WAIT_POLICY=PASSIVE``, once.

    Does nothing (returns) unless the process was started as ``botorch-pref <command> ...``
    (``sys.argv[1:]`` begins with ``command``: never inside a test or a host program calling
    :func:`botorch_pref.cli.main`), the environment sets none of ``OMP_WAIT_POLICY``,
    ``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS``, and this is not already the re-executed process.
    Otherwise replaces the process (same pid, arguments and environment plus the policy) with
    ``python -m botorch_pref.cli <the same arguments>`` and never returns.

    Args:
        command: The leading command words, e.g. ``["lfpl", "train"]``.
    """
    if list(sys.argv[1 : 1 + len(command)]) != list(command):
        return
    if os.environ.get(REEXEC_MARKER) or os.environ.get("OMP_WAIT_POLICY"):
        return
    if any(os.environ.get(name) for name in USER_SETTINGS):
        return
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", REEXEC_MARKER: "1"}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "botorch_pref.cli", *sys.argv[1:]], env)
