"""BoTorch's inputs to ``PairwiseGP``, as :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP`
takes them.

The model is a drop-in for :class:`botorch.models.PairwiseGP`, so it accepts what BoTorch and Ax
hand that class: BoTorch's pairwise likelihoods (:func:`as_likelihood`), a ``RankingDataset``
through ``construct_inputs`` (:func:`ranking_dataset_inputs`), and BoTorch's standard normal
samplers in ``fantasize`` (:func:`as_pairwise_sampler`).
"""

from __future__ import annotations

from typing import Any

import torch
from botorch.exceptions.errors import UnsupportedError
from botorch.models.likelihoods.pairwise import (
    PairwiseLogitLikelihood,
    PairwiseProbitLikelihood,
)
from botorch.sampling.base import MCSampler
from botorch.sampling.normal import IIDNormalSampler, SobolQMCNormalSampler
from botorch.sampling.pairwise_samplers import (
    PairwiseIIDNormalSampler,
    PairwiseMCSampler,
    PairwiseSobolQMCNormalSampler,
)
from botorch.utils.datasets import RankingDataset, SupervisedDataset

from botorch_pref.likelihoods import PairwiseLikelihood, PairwiseLogit, PairwiseProbit

__all__ = ["CONSTRUCT_OPTIONS", "as_likelihood", "as_pairwise_sampler", "ranking_dataset_inputs"]

#: The constructor options ``construct_inputs`` passes through besides the dataset.
CONSTRUCT_OPTIONS = ("form", "tol", "max_iter")


def as_likelihood(likelihood: Any) -> PairwiseLikelihood:
    """Our likelihood for ``likelihood``.

    Args:
        likelihood: ``None`` (the default :class:`~botorch_pref.likelihoods.PairwiseProbit`), a
            :class:`~botorch_pref.likelihoods.PairwiseLikelihood`, or BoTorch's
            ``PairwiseProbitLikelihood`` or ``PairwiseLogitLikelihood``, taken as
            ``PairwiseProbit()`` and ``PairwiseLogit()`` (same link and scale:
            ``Phi(delta / sqrt 2)`` and ``sigmoid(delta)``).

    Returns:
        A :class:`~botorch_pref.likelihoods.PairwiseLikelihood`.

    Raises:
        TypeError: for anything else.
    """
    if likelihood is None:
        return PairwiseProbit()
    if isinstance(likelihood, PairwiseLikelihood):
        return likelihood
    if type(likelihood) is PairwiseProbitLikelihood:
        return PairwiseProbit()
    if type(likelihood) is PairwiseLogitLikelihood:
        return PairwiseLogit()
    raise TypeError(
        "likelihood must be a botorch_pref PairwiseLikelihood, or BoTorch's "
        "PairwiseProbitLikelihood or PairwiseLogitLikelihood (taken as PairwiseProbit() and "
        f"PairwiseLogit()); got {type(likelihood)}."
    )


def ranking_dataset_inputs(training_data: SupervisedDataset, **kwargs: Any) -> dict[str, Any]:
    r"""Constructor inputs from a ``RankingDataset``, as ``PairwiseGP.construct_inputs``.

    Each ranked pair ``indices = (i, j)`` with ranks ``r`` (0 = preferred) becomes the
    comparison ``(indices[r_0], indices[r_1])`` (BoTorch's ``gather``), so a pair stored loser
    first is turned around.

    Args:
        training_data: A ``RankingDataset`` of pairs (``SliceContainer`` ``X`` of designs and
            index pairs, ``m x 2`` ranks ``Y``).
        kwargs: Constructor options passed through: :data:`CONSTRUCT_OPTIONS`.

    Returns:
        ``{"datapoints": n x d, "comparisons": m x 2, **kwargs}``.

    Raises:
        UnsupportedError: for a dataset that is not a ``RankingDataset`` (as ``PairwiseGP``),
            rankings of more than two options or ties (which ``PairwiseGP`` would turn into
            wrong comparisons), and unknown options (e.g. ``categorical_features``).
    """
    if not isinstance(training_data, RankingDataset):
        raise UnsupportedError(
            "Only `RankingDataset` is supported for `PairwiseLaplaceGP` (as for "
            f"`PairwiseGP`). Received {type(training_data)}."
        )
    unknown = sorted(set(kwargs) - set(CONSTRUCT_OPTIONS))
    if unknown:
        raise UnsupportedError(
            f"PairwiseLaplaceGP.construct_inputs does not take {unknown}; besides the "
            "dataset it passes through form, tol and max_iter."
        )
    indices, ranks = training_data._X.indices, training_data.Y.long()
    if indices.shape[-1] != 2:
        raise UnsupportedError(
            f"The RankingDataset ranks {indices.shape[-1]} options at a time; "
            "construct_inputs takes pairs (give longer rankings as PreferenceData with the "
            "Ranking likelihood)."
        )
    if bool((ranks[..., 0] == ranks[..., 1]).any()):
        raise UnsupportedError(
            "The RankingDataset holds a tie (equal ranks); construct_inputs takes strict "
            "pairs (record ties with PreferenceData.add_tie and a tie_threshold likelihood)."
        )
    comparisons = torch.gather(indices, -1, ranks)
    return {"datapoints": training_data._X.values, "comparisons": comparisons, **kwargs}


#: BoTorch's standard normal samplers and their pairwise counterparts.
_PAIRWISE_SAMPLERS = {
    SobolQMCNormalSampler: PairwiseSobolQMCNormalSampler,
    IIDNormalSampler: PairwiseIIDNormalSampler,
}


def as_pairwise_sampler(sampler: MCSampler) -> MCSampler:
    """The sampler ``fantasize`` should use: one that draws comparisons, not utilities.

    A preference model's observations are comparisons, so its fantasies must be too. BoTorch's
    ``PairwiseSobolQMCNormalSampler`` (``PairwiseIIDNormalSampler``) draws utilities at the
    ``q`` fantasy designs with the base sampler and returns the comparisons they imply. A plain
    ``SobolQMCNormalSampler`` (``IIDNormalSampler``), which BoTorch's acquisition functions
    build by default, is replaced by its pairwise counterpart with the same ``sample_shape`` and
    seed (all pairs among the ``q`` designs compared); other samplers are returned unchanged.

    Args:
        sampler: The sampler handed to ``fantasize``.

    Returns:
        A pairwise sampler, or ``sampler`` itself.
    """
    if isinstance(sampler, PairwiseMCSampler):
        return sampler
    pairwise = _PAIRWISE_SAMPLERS.get(type(sampler))
    if pairwise is None:
        return sampler
    return pairwise(sample_shape=sampler.sample_shape, seed=sampler.seed)
