"""botorch-pref: preferential Bayesian optimisation for BoTorch."""

from botorch_pref.data.preferences import PreferenceData
from botorch_pref.likelihoods import (
    Choice,
    ObservationKind,
    PairwiseLogit,
    PairwiseProbit,
    Ranking,
)
from botorch_pref.loop import PreferenceOptimizer, QueryRecord, Recommendation
from botorch_pref.models.evidence import LaplaceEvidence
from botorch_pref.models.pairwise import PairwiseLaplaceGP, PreferenceDataError

__version__ = "0.1.0.dev0"

__all__ = [
    "Choice",
    "LaplaceEvidence",
    "ObservationKind",
    "PairwiseLaplaceGP",
    "PairwiseLogit",
    "PairwiseProbit",
    "PreferenceData",
    "PreferenceDataError",
    "PreferenceOptimizer",
    "QueryRecord",
    "Ranking",
    "Recommendation",
    "__version__",
]
