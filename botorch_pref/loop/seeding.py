"""Seeds derived from ``(seed, query number, stream)``: the loop's only source of randomness.

Every random draw of a preference-optimisation run (initial and random queries, the acquisition
optimiser's raw samples and restarts, qEUBO's base samples, hyperparameter-fit restarts, the
replacement of a repeated option) is seeded by :func:`derived_seed` from the run's seed, the
number of the query it belongs to and a :class:`Stream` naming the kind of randomness. So a run
is a function of its seed and its answers: replaying the answers reproduces it, and replication
``i`` of a batched study draws exactly what a sequential run with seed ``seed + i`` draws.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
import torch
from torch import Tensor

__all__ = ["Stream", "derived_seed", "uniform"]


class Stream(IntEnum):
    """The kinds of randomness of a run, each with its own stream of derived seeds."""

    RANDOM = 0  #: initial and random queries
    ACQF = 1  #: the acquisition optimiser's raw samples, restarts and qEUBO's base samples
    FIT = 2  #: restarts of a hyperparameter fit
    REPAIR = 3  #: random designs that replace a repeated option of a query
    RECOMMEND = 4  #: the posterior-mean maximiser of ``best(among="anywhere")``
    MODEL = 5  #: a model's own draws when it is built or given data (``PairwiseGP``'s mode start)


def derived_seed(seed: int, k: int, stream: int) -> int:
    """A well-mixed 63-bit seed for query ``k`` of a run seeded ``seed`` and a ``stream``.

    Args:
        seed: The run's seed (a non-negative integer).
        k: The query number (0 for the first query).
        stream: A :class:`Stream` (or any non-negative integer naming a stream).

    Returns:
        An integer in ``[0, 2**63)``.
    """
    state = np.random.SeedSequence([seed, k, int(stream)]).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def uniform(
    n: int,
    d: int,
    seed: int,
    k: int,
    stream: int,
    *,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> Tensor:
    """``n x d`` uniform designs on the unit cube drawn from :func:`derived_seed`.

    They are drawn on the CPU, so the designs are the same on every device.
    """
    g = torch.Generator().manual_seed(derived_seed(seed, k, stream))
    return torch.rand(n, d, generator=g, dtype=dtype).to(device)
