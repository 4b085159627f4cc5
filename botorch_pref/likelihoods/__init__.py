r"""Likelihoods for preference data: pairs, choices among q options, rankings and ties.

* :mod:`~botorch_pref.likelihoods.base`: :class:`ObservationKind` and
  :class:`PairwiseLikelihood`, the interface the Laplace engines use (log-probability, gradient
  and curvature of pairs, ties and general observations).
* :mod:`~botorch_pref.likelihoods.links`: :class:`PairwiseProbit`
  (:math:`P(v \succ u) = \Phi(\delta/s)`, Thurstone) and :class:`PairwiseLogit`
  (:math:`\operatorname{sigmoid}(\delta/s)`, Bradley-Terry), each with an optional tie
  threshold.
* :mod:`~botorch_pref.likelihoods.rankings`: :class:`Choice` (multinomial logit) and
  :class:`Ranking` (Plackett-Luce), on :func:`plackett_luce_stages`.
"""

from botorch_pref.likelihoods.base import ObservationKind, PairwiseLikelihood
from botorch_pref.likelihoods.links import PairwiseLogit, PairwiseProbit, probit_hazard
from botorch_pref.likelihoods.rankings import Choice, Ranking, plackett_luce_stages

__all__ = [
    "Choice",
    "ObservationKind",
    "PairwiseLikelihood",
    "PairwiseLogit",
    "PairwiseProbit",
    "Ranking",
    "plackett_luce_stages",
    "probit_hazard",
]
