"""Data loaders: MovieLens ratings in the GroupLens and RecBole formats."""

from botorch_pref.data.movielens import Interactions, load_movielens

__all__ = ["Interactions", "load_movielens"]
