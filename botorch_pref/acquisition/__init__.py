"""Acquisition functions for preferential BO: champion-challenger and EUBO/qEUBO builders."""

from botorch_pref.acquisition.champion import ChampionChallenger, champion, champion_index
from botorch_pref.acquisition.eubo import LaplaceEUBO, LaplaceQEUBO, make_eubo, make_qeubo
from botorch_pref.acquisition.settings import lean_kernels

__all__ = [
    "ChampionChallenger",
    "LaplaceEUBO",
    "LaplaceQEUBO",
    "champion",
    "champion_index",
    "lean_kernels",
    "make_eubo",
    "make_qeubo",
]
