r"""Likelihoods for preference data: pairs, choices, rankings, ties, graded answers, ratings.

* :mod:`~botorch_pref.likelihoods.base`: :class:`ObservationKind` and
  :class:`PairwiseLikelihood`, the interface the Laplace engines use (log-probability, gradient
  and curvature of pairs, ties and general observations).
* :mod:`~botorch_pref.likelihoods.links`: :class:`PairwiseProbit`
  (:math:`P(v \succ u) = \Phi(\delta/s)`, Thurstone) and :class:`PairwiseLogit`
  (:math:`\operatorname{sigmoid}(\delta/s)`, Bradley-Terry), each with an optional tie
  threshold.
* :mod:`~botorch_pref.likelihoods.ordinal`: graded comparisons on ``k`` levels and ordinal
  ratings (interval likelihoods with fitted thresholds), for both links.
* :mod:`~botorch_pref.likelihoods.rankings`: :class:`Choice` (multinomial logit) and
  :class:`Ranking` (Plackett-Luce), on :func:`plackett_luce_stages`.
"""

from botorch_pref.likelihoods.base import SCALAR_KINDS, ObservationKind, PairwiseLikelihood
from botorch_pref.likelihoods.links import PairwiseLogit, PairwiseProbit, probit_hazard
from botorch_pref.likelihoods.ordinal import OrdinalAnswers, graded_free_thresholds
from botorch_pref.likelihoods.rankings import Choice, Ranking, plackett_luce_stages

__all__ = [
    "SCALAR_KINDS",
    "Choice",
    "ObservationKind",
    "OrdinalAnswers",
    "PairwiseLikelihood",
    "PairwiseLogit",
    "PairwiseProbit",
    "Ranking",
    "graded_free_thresholds",
    "plackett_luce_stages",
    "probit_hazard",
]
