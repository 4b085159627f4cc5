"""Acquisition functions for preferential BO: champion-challenger, EUBO/qEUBO, local boxes, and
a one-step lookahead on the recommendation."""

from botorch_pref.acquisition.champion import ChampionChallenger, champion, champion_index
from botorch_pref.acquisition.eubo import LaplaceEUBO, LaplaceQEUBO, make_eubo, make_qeubo
from botorch_pref.acquisition.gpytorch_settings import lean_kernels
from botorch_pref.acquisition.improvement import expected_improvement, log_expected_improvement
from botorch_pref.acquisition.local import LocalBox, local_box, near_boundary
from botorch_pref.acquisition.lookahead import (
    LookaheadBestCompared,
    answer_update,
    probit_scale,
)
from botorch_pref.acquisition.moments import (
    MomentFactors,
    RBFMoments,
    correlation,
    correlation_slope,
    design_centre,
    moment_factors,
    moments_from_factors,
    pair_moments,
    pair_moments_vjp,
    rbf_predictive_moments,
    supports_rbf_moments,
)
from botorch_pref.acquisition.sampling import MemberSobolSampler, member_sobol_normal

__all__ = [
    "ChampionChallenger",
    "LaplaceEUBO",
    "LaplaceQEUBO",
    "LocalBox",
    "LookaheadBestCompared",
    "MemberSobolSampler",
    "MomentFactors",
    "RBFMoments",
    "answer_update",
    "champion",
    "champion_index",
    "correlation",
    "correlation_slope",
    "design_centre",
    "expected_improvement",
    "lean_kernels",
    "local_box",
    "log_expected_improvement",
    "make_eubo",
    "make_qeubo",
    "member_sobol_normal",
    "moment_factors",
    "moments_from_factors",
    "near_boundary",
    "pair_moments",
    "pair_moments_vjp",
    "probit_scale",
    "rbf_predictive_moments",
    "supports_rbf_moments",
]
