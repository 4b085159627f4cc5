"""Leave-one-out evaluation of item scorers: LFPL, and the MostPopular and Random baselines.

One interaction per user is held out (:func:`~botorch_pref.lfpl.feedback.leave_one_out`), and
the held-out item is compared with every item the user never interacted with: per-user AUC,
hit rate and NDCG at ``k`` (:func:`~botorch_pref.lfpl.metrics.heldout_item_metrics`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from botorch_pref.lfpl.dyads import check_int
from botorch_pref.lfpl.feedback import ImplicitFeedback, LeaveOneOutSplit
from botorch_pref.lfpl.metrics import heldout_item_metrics

__all__ = ["EvaluationResult", "ItemScorer", "MostPopular", "Random", "evaluate"]


class ItemScorer(Protocol):
    """Anything that scores every item for a batch of users (LFPL, the baselines)."""

    def score_items(self, rows: Tensor) -> Tensor:
        """``(B, n_items)`` scores for the ``(B,)`` users ``rows``."""
        ...


class MostPopular:
    """Scores each item by its number of training interactions, for every user."""

    def __init__(self, train: ImplicitFeedback) -> None:
        """Count the interactions of each item in ``train``."""
        self.counts = train.item_counts().to(torch.get_default_dtype())

    def score_items(self, rows: Tensor) -> Tensor:
        """``(B, n_items)`` popularity scores."""
        return self.counts.expand(rows.shape[0], -1)


class Random:
    """Scores items uniformly at random (a fresh draw on every call)."""

    def __init__(self, n_items: int, seed: int = 0, device: torch.device | str | None = None):
        """Args: ``n_items`` items, random ``seed``, ``device`` of the scores."""
        self.n_items = int(n_items)
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.generator = torch.Generator(device=self.device).manual_seed(seed)

    def score_items(self, rows: Tensor) -> Tensor:
        """``(B, n_items)`` i.i.d. uniform scores."""
        return torch.rand(rows.shape[0], self.n_items, generator=self.generator, device=self.device)


@dataclass
class EvaluationResult:
    """Mean leave-one-out metrics over the test users, and the per-user values.

    Attributes:
        auc: Mean per-user AUC over all unobserved items (ties count one half).
        hr: Mean hit rate at ``k`` over all items except the user's training positives.
        ndcg: Mean NDCG at ``k``, same ranking.
        k: The cut-off.
        n_users: Number of test users.
        per_user: ``{"auc", "hr", "ndcg"}`` -> ``(n_users,)`` tensors.
    """

    auc: float
    hr: float
    ndcg: float
    k: int
    n_users: int
    per_user: dict[str, Tensor]


@torch.no_grad()
def evaluate(
    model: ItemScorer, split: LeaveOneOutSplit, k: int = 10, batch_size: int = 512
) -> EvaluationResult:
    """Leave-one-out AUC, HR@k and NDCG@k of a model that scores every item.

    Args:
        model: Anything with ``score_items(users) -> (B, n_items)``.
        split: The split; the model must have been trained on ``split.train`` only.
        k: Cut-off of the hit rate and NDCG.
        batch_size: Users scored at once (memory grows as ``batch_size * n_items``).

    Returns:
        An :class:`EvaluationResult`.
    """
    check_int("k", k, 1)
    check_int("batch_size", batch_size, 1)
    if not isinstance(split, LeaveOneOutSplit):
        raise TypeError(f"split must be a LeaveOneOutSplit, got {type(split).__name__}.")
    if split.users.numel() == 0:
        raise ValueError("the split has no held-out interaction.")
    parts: dict[str, list[Tensor]] = {"auc": [], "hr": [], "ndcg": []}
    for users, items in zip(
        split.users.split(batch_size), split.items.split(batch_size), strict=True
    ):
        scores = model.score_items(users)
        if scores.shape != (users.shape[0], split.train.n_items):
            raise ValueError(
                f"score_items returned shape {tuple(scores.shape)}, expected "
                f"({users.shape[0]}, {split.train.n_items})."
            )
        exclude = split.train.exclusion_mask(users.to(split.train.device)).to(scores.device)
        values = heldout_item_metrics(scores, items.to(scores.device), exclude, k=k)
        for name, value in values.items():
            parts[name].append(value)
    per_user = {name: torch.cat(value) for name, value in parts.items()}
    return EvaluationResult(
        auc=float(per_user["auc"].mean()),
        hr=float(per_user["hr"].mean()),
        ndcg=float(per_user["ndcg"].mean()),
        k=k,
        n_users=int(split.users.numel()),
        per_user=per_user,
    )
