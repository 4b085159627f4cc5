r"""Which Laplace engine takes which answers.

Answers that are functions of one difference row each (pairs, graded comparisons, ratings:
:data:`~botorch_pref.likelihoods.SCALAR_KINDS` without ties) take the
:class:`~botorch_pref.inference.pairs.PairEngine`, whose diagonal curvature over merged pairs is
the cheapest; any data with choices, rankings or ties take the
:class:`~botorch_pref.inference.blocks.BlockEngine` (ties stay there, as they always have, so
their results do not change). Either way the likelihood first takes the data's numbers of levels
(:meth:`~botorch_pref.likelihoods.OrdinalAnswers.match_levels`).
"""

from __future__ import annotations

import torch

from botorch_pref.data.preferences import PreferenceData
from botorch_pref.inference.blocks import BlockEngine, build_observations
from botorch_pref.inference.engine import LaplaceEngine
from botorch_pref.inference.pairs import PairEngine
from botorch_pref.likelihoods import ObservationKind, PairwiseLikelihood

__all__ = ["engine_for_data"]

#: The kinds the pair engine takes.
_PAIR_ENGINE_KINDS = frozenset(
    {ObservationKind.PAIR, ObservationKind.GRADED, ObservationKind.RATING}
)


def engine_for_data(
    likelihood: PairwiseLikelihood, data: PreferenceData, n: int, dtype: torch.dtype
) -> LaplaceEngine:
    """The Laplace engine of validated data with a flat batch (``data.reshape(-1)``).

    Args:
        likelihood: The model's likelihood; it takes the data's numbers of levels.
        data: ``B x m x Q`` observations among ``n`` designs.
        n: Number of designs.
        dtype: Floating dtype of the model.

    Returns:
        A :class:`~botorch_pref.inference.pairs.PairEngine` for pairs, graded comparisons and
        ratings, a :class:`~botorch_pref.inference.blocks.BlockEngine` otherwise.

    Raises:
        ValueError: When the likelihood was built for other numbers of levels.
    """
    likelihood.match_levels(data.graded_levels, data.rating_levels)
    if data.kinds_present <= _PAIR_ENGINE_KINDS:
        rows = data.options[..., :2]
        return PairEngine.from_answers(likelihood, rows, data.kind, data.level, n, dtype)
    structure = build_observations(data.options, data.kind, data.n_stages, data.level)
    return BlockEngine(likelihood, structure, n)
