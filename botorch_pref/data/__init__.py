"""Preference data containers, and data loaders (MovieLens in the GroupLens and RecBole formats)."""

from botorch_pref.data.movielens import Interactions, load_movielens
from botorch_pref.data.preferences import ObservationKind, PreferenceData, PreferenceDataError

__all__ = [
    "Interactions",
    "ObservationKind",
    "PreferenceData",
    "PreferenceDataError",
    "load_movielens",
]
