r"""Builders for BoTorch's EUBO and qEUBO on a preference model.

EUBO (Lin et al., 2022) scores a pair of designs by the expected utility of the better one,

.. math::

    \mathrm{EUBO}(x_1, x_2) = E[\max(g(x_1), g(x_2))]
    = \mu_2 + t\,h\big((\mu_1 - \mu_2)/t\big), \quad t^2 = v_1 + v_2 - 2 k_{12},

with :math:`h(u) = \phi(u) + u\Phi(u)`; qEUBO (Astudillo et al., 2023) is its Monte-Carlo
generalisation to :math:`q` options, :math:`E[\max_i g(x_i)]`. Both are BoTorch's own classes
(``AnalyticExpectedUtilityOfBestOption``, ``qExpectedUtilityOfBestOption``); these helpers only
fix the choices the optimisation loop needs (a seeded scrambled-Sobol sampler for qEUBO, so that
the acquisition surface is deterministic and L-BFGS can climb it).
"""

from __future__ import annotations

import torch
from botorch.acquisition.preference import (
    AnalyticExpectedUtilityOfBestOption,
    qExpectedUtilityOfBestOption,
)
from botorch.models.model import Model
from botorch.sampling.normal import SobolQMCNormalSampler
from torch import Tensor

__all__ = ["make_eubo", "make_qeubo"]


def make_eubo(
    model: Model, previous_winner: Tensor | None = None
) -> AnalyticExpectedUtilityOfBestOption:
    r"""Analytic EUBO on pairs (``q = 2``), or on ``q = 1`` challengers of a fixed design.

    With ``previous_winner`` :math:`c`, BoTorch's class returns
    :math:`E[(g(x) - g(c))^+]` (it drops the :math:`\mu(c)` term), which is
    :class:`~botorch_pref.acquisition.ChampionChallenger`'s value.

    Args:
        model: A preference model with ``datapoints`` (``PairwiseLaplaceGP``, ``PairwiseGP``).
        previous_winner: An optional ``1 x d`` design to challenge.

    Returns:
        The acquisition function.
    """
    if previous_winner is not None:
        previous_winner = previous_winner.reshape(1, -1)
    return AnalyticExpectedUtilityOfBestOption(pref_model=model, previous_winner=previous_winner)


def make_qeubo(
    model: Model, num_samples: int = 128, seed: int | None = None
) -> qExpectedUtilityOfBestOption:
    r"""Monte-Carlo qEUBO, :math:`E[\max_{i \le q} g(x_i)]`, with a scrambled-Sobol sampler.

    Args:
        model: A preference model with a Gaussian posterior.
        num_samples: Quasi-Monte-Carlo samples of the joint posterior.
        seed: Seed of the Sobol scrambling (fixed base samples: a deterministic surface).

    Returns:
        The acquisition function.
    """
    if int(num_samples) != num_samples or num_samples < 1:
        raise ValueError(f"num_samples must be a positive integer, got {num_samples!r}.")
    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([int(num_samples)]), seed=seed)
    return qExpectedUtilityOfBestOption(pref_model=model, sampler=sampler)
