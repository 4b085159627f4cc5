"""Acquisition functions for preferential BO: champion-challenger, EUBO/qEUBO, local boxes."""

from botorch_pref.acquisition.champion import ChampionChallenger, champion, champion_index
from botorch_pref.acquisition.eubo import LaplaceEUBO, LaplaceQEUBO, make_eubo, make_qeubo
from botorch_pref.acquisition.improvement import expected_improvement, log_expected_improvement
from botorch_pref.acquisition.local import LocalBox, local_box, near_boundary
from botorch_pref.acquisition.moments import (
    RBFMoments,
    correlation,
    rbf_predictive_moments,
    supports_rbf_moments,
)
from botorch_pref.acquisition.settings import lean_kernels

__all__ = [
    "ChampionChallenger",
    "LaplaceEUBO",
    "LaplaceQEUBO",
    "LocalBox",
    "RBFMoments",
    "champion",
    "champion_index",
    "correlation",
    "expected_improvement",
    "lean_kernels",
    "local_box",
    "log_expected_improvement",
    "make_eubo",
    "make_qeubo",
    "near_boundary",
    "rbf_predictive_moments",
    "supports_rbf_moments",
]
