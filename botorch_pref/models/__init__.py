"""Preference models: the Laplace preference GP, its evidence and its default kernels."""

from botorch_pref.models.evidence import LaplaceEvidence
from botorch_pref.models.kernels import default_covar_module, make_covar_module
from botorch_pref.models.pairwise import (
    PairwiseLaplaceGP,
    PreferenceDataError,
    PreferenceInputError,
)
from botorch_pref.models.posterior import LaplacePosteriorMixin

__all__ = [
    "LaplaceEvidence",
    "LaplacePosteriorMixin",
    "PairwiseLaplaceGP",
    "PreferenceDataError",
    "PreferenceInputError",
    "default_covar_module",
    "make_covar_module",
]
