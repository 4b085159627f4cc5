"""Latent-feature Plackett-Luce (LFPL) models for rankings of dyads, and LFPL/IF for implicit
feedback: the likelihood, the model, its training, evaluation metrics and synthetic data."""

from botorch_pref.lfpl.implicit import (
    EvaluationResult,
    ImplicitFeedback,
    ItemScorer,
    LeaveOneOutSplit,
    MostPopular,
    Random,
    evaluate,
    fit_implicit,
    leave_one_out,
)
from botorch_pref.lfpl.metrics import heldout_item_metrics, kendall_tau
from botorch_pref.lfpl.model import LFPL
from botorch_pref.lfpl.plackett_luce import gumbel_rankings, plackett_luce_nll
from botorch_pref.lfpl.rankings import DyadRankings
from botorch_pref.lfpl.synthetic import CVResult, cross_validate_lfpl, heldout_tau, sample_lfpl
from botorch_pref.lfpl.training import FitResult, fit_lfpl

__all__ = [
    "LFPL",
    "CVResult",
    "DyadRankings",
    "EvaluationResult",
    "FitResult",
    "ImplicitFeedback",
    "ItemScorer",
    "LeaveOneOutSplit",
    "MostPopular",
    "Random",
    "cross_validate_lfpl",
    "evaluate",
    "fit_implicit",
    "fit_lfpl",
    "gumbel_rankings",
    "heldout_item_metrics",
    "heldout_tau",
    "kendall_tau",
    "leave_one_out",
    "plackett_luce_nll",
    "sample_lfpl",
]
