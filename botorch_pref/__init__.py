"""botorch-pref: preferential Bayesian optimisation for BoTorch."""

from botorch_pref.likelihoods import PairwiseLogit, PairwiseProbit
from botorch_pref.loop import PreferenceOptimizer, QueryRecord, Recommendation
from botorch_pref.mlls import LaplaceEvidence
from botorch_pref.models.pairwise import PairwiseLaplaceGP, PreferenceDataError

__version__ = "0.1.0.dev0"

__all__ = [
    "LaplaceEvidence",
    "PairwiseLaplaceGP",
    "PairwiseLogit",
    "PairwiseProbit",
    "PreferenceDataError",
    "PreferenceOptimizer",
    "QueryRecord",
    "Recommendation",
    "__version__",
]
