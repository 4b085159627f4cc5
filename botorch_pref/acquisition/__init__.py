"""Acquisition functions for preferential BO: champion-challenger and EUBO/qEUBO builders."""

from botorch_pref.acquisition.champion import ChampionChallenger, champion, champion_index
from botorch_pref.acquisition.eubo import LaplaceEUBO, LaplaceQEUBO, make_eubo, make_qeubo

__all__ = [
    "ChampionChallenger",
    "LaplaceEUBO",
    "LaplaceQEUBO",
    "champion",
    "champion_index",
    "make_eubo",
    "make_qeubo",
]
