"""Latent-feature Plackett-Luce (LFPL) models for rankings of dyads, and LFPL/IF for implicit
feedback: the likelihood, the model, its training (fused single-process and data-parallel),
a recommender in original ids, evaluation metrics and synthetic data."""

from botorch_pref.lfpl.dyads import DyadRankings
from botorch_pref.lfpl.evaluation import EvaluationResult, ItemScorer, MostPopular, Random, evaluate
from botorch_pref.lfpl.factor_model import LFPL
from botorch_pref.lfpl.feedback import ImplicitFeedback, LeaveOneOutSplit, leave_one_out
from botorch_pref.lfpl.implicit import fit_implicit
from botorch_pref.lfpl.metrics import heldout_item_metrics, kendall_tau
from botorch_pref.lfpl.openmp import lfpl_threads
from botorch_pref.lfpl.plackett_luce import gumbel_rankings, plackett_luce_nll
from botorch_pref.lfpl.recommender import LFPLRecommender, Recommendations
from botorch_pref.lfpl.simulation import (
    CVResult,
    cross_validate_lfpl,
    heldout_tau,
    power_law_interactions,
    sample_lfpl,
)
from botorch_pref.lfpl.training import FitResult, fit_lfpl

__all__ = [
    "LFPL",
    "CVResult",
    "DyadRankings",
    "EvaluationResult",
    "FitResult",
    "ImplicitFeedback",
    "ItemScorer",
    "LFPLRecommender",
    "LeaveOneOutSplit",
    "MostPopular",
    "Random",
    "Recommendations",
    "cross_validate_lfpl",
    "evaluate",
    "fit_implicit",
    "fit_lfpl",
    "gumbel_rankings",
    "heldout_item_metrics",
    "heldout_tau",
    "kendall_tau",
    "leave_one_out",
    "lfpl_threads",
    "plackett_luce_nll",
    "power_law_interactions",
    "sample_lfpl",
]
