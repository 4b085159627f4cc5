"""Preference models."""

from botorch_pref.models.pairwise import PairwiseLaplaceGP, PreferenceDataError

__all__ = ["PairwiseLaplaceGP", "PreferenceDataError"]
