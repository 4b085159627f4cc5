r"""LFPL with implicit feedback (LFPL/IF): observed interactions ranked above unobserved ones.

An observed interaction :math:`(u, i)` and an item :math:`j` that user :math:`u` never interacted
with give the length-2 dyad ranking :math:`(u, i) \succ (u, j)`, whose Plackett-Luce negative
log-likelihood is

.. math::

    -\log \frac{e^{U_u^\top V_i}}{e^{U_u^\top V_i} + e^{U_u^\top V_j}}
        = \operatorname{softplus}\big(U_u^\top (V_j - V_i)\big),

the BPR loss. Training draws batches of thousands of such pairs; negatives are drawn uniformly
and only the draws that hit an observed item are redrawn (membership is a binary search in the
sorted interaction keys ``u * n_items + i``, all in torch, on the device of the data).

Evaluation follows the leave-one-out protocol: one interaction per user is held out, and the
held-out item is compared with every item the user never interacted with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from botorch_pref.lfpl.metrics import heldout_item_metrics
from botorch_pref.lfpl.model import LFPL
from botorch_pref.lfpl.plackett_luce import plackett_luce_nll
from botorch_pref.lfpl.training import (
    FitResult,
    _check_common,
    _gather,
    _train,
)

__all__ = [
    "EvaluationResult",
    "ImplicitFeedback",
    "ItemScorer",
    "LeaveOneOutSplit",
    "MostPopular",
    "Random",
    "evaluate",
    "fit_implicit",
    "leave_one_out",
]


class ImplicitFeedback:
    """Observed (user, item) interactions, deduplicated and sorted by user then item.

    Attributes:
        users: ``(n,)`` user ids.
        items: ``(n,)`` item ids.
        timestamps: ``(n,)`` timestamps (the latest one of merged duplicates) or ``None``.
        keys: ``(n,)`` sorted keys ``user * n_items + item``.
        indptr: ``(n_users + 1,)`` offsets: user ``u`` owns entries ``indptr[u]:indptr[u+1]``.
    """

    def __init__(
        self,
        pairs: Tensor,
        n_users: int | None = None,
        n_items: int | None = None,
        timestamps: Tensor | None = None,
    ) -> None:
        """Validate and index interactions.

        Args:
            pairs: ``(n, 2)`` integer tensor (or nested list) of ``(user id, item id)``.
            n_users: Number of users (default: one more than the largest user id).
            n_items: Number of items (default: one more than the largest item id).
            timestamps: Optional ``(n,)`` timestamps of the interactions.
        """
        pairs = torch.as_tensor(pairs)
        if pairs.dim() != 2 or pairs.shape[1] != 2:
            raise ValueError(f"pairs must have shape (n, 2), got {tuple(pairs.shape)}.")
        if pairs.is_floating_point():
            raise ValueError("user and item ids must be integers.")
        if pairs.shape[0] == 0:
            raise ValueError("no interactions.")
        pairs = pairs.long()
        users, items = pairs[:, 0], pairs[:, 1]
        self.n_users = int(users.max()) + 1 if n_users is None else int(n_users)
        self.n_items = int(items.max()) + 1 if n_items is None else int(n_items)
        for name, ids, size in (("user", users, self.n_users), ("item", items, self.n_items)):
            bad = ((ids < 0) | (ids >= size)).nonzero()
            if bad.numel() > 0:
                n = int(bad[0, 0])
                raise ValueError(
                    f"interaction {n}: {name} id {int(ids[n])} is out of range [0, {size})."
                )
        keys = users * self.n_items + items
        self.keys, inverse = torch.unique(keys, sorted=True, return_inverse=True)
        self.users = torch.div(self.keys, self.n_items, rounding_mode="floor")
        self.items = self.keys - self.users * self.n_items
        self.timestamps = None
        if timestamps is not None:
            timestamps = torch.as_tensor(timestamps, device=pairs.device)
            if timestamps.shape != users.shape:
                raise ValueError(
                    f"timestamps must have shape ({users.shape[0]},), got "
                    f"{tuple(timestamps.shape)}."
                )
            latest = torch.full(self.keys.shape, torch.iinfo(torch.long).min).to(timestamps)
            if timestamps.is_floating_point():
                latest.fill_(-torch.inf)
            self.timestamps = latest.scatter_reduce(0, inverse, timestamps, reduce="amax")
        counts = torch.bincount(self.users, minlength=self.n_users)
        self.indptr = torch.zeros(self.n_users + 1, dtype=torch.long, device=pairs.device)
        self.indptr[1:] = torch.cumsum(counts, 0)
        saturated = (counts >= self.n_items).nonzero()
        self._saturated_user = int(saturated[0, 0]) if saturated.numel() > 0 else None

    # ------------------------------------------------------------------ basics
    def __len__(self) -> int:
        return int(self.keys.shape[0])

    def __repr__(self) -> str:
        return (
            f"ImplicitFeedback(n_interactions={len(self)}, n_users={self.n_users}, "
            f"n_items={self.n_items}, device={self.device})"
        )

    @property
    def device(self) -> torch.device:
        """The device of the tensors."""
        return self.keys.device

    @property
    def pairs(self) -> Tensor:
        """``(n, 2)`` deduplicated ``(user, item)`` pairs."""
        return torch.stack([self.users, self.items], dim=-1)

    def to(self, device: torch.device | str) -> ImplicitFeedback:
        """Return a copy on ``device``."""
        ts = None if self.timestamps is None else self.timestamps.to(device)
        return ImplicitFeedback(self.pairs.to(device), self.n_users, self.n_items, ts)

    def user_counts(self) -> Tensor:
        """``(n_users,)`` number of interactions of each user."""
        return self.indptr[1:] - self.indptr[:-1]

    def item_counts(self) -> Tensor:
        """``(n_items,)`` number of users who interacted with each item (popularity)."""
        return torch.bincount(self.items, minlength=self.n_items)

    def contains(self, users: Tensor, items: Tensor) -> Tensor:
        """Whether each ``(users[k], items[k])`` was observed (binary search, same shape)."""
        query = users * self.n_items + items
        pos = torch.searchsorted(self.keys, query).clamp_max(len(self) - 1)
        return self.keys[pos] == query

    def exclusion_mask(self, users: Tensor) -> Tensor:
        """``(len(users), n_items)`` boolean mask of each user's observed items."""
        counts = self.indptr[users + 1] - self.indptr[users]
        local = torch.repeat_interleave(torch.arange(users.shape[0], device=self.device), counts)
        starts = torch.repeat_interleave(self.indptr[users], counts)
        offsets = torch.arange(local.shape[0], device=self.device)
        offsets = offsets - torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
        mask = torch.zeros(users.shape[0], self.n_items, dtype=torch.bool, device=self.device)
        mask[local, self.items[starts + offsets]] = True
        return mask

    # ------------------------------------------------------------------ sampling
    def sample_negatives(
        self, users: Tensor, generator: torch.Generator | None = None, max_rounds: int = 16
    ) -> Tensor:
        """Draw, for each user, an item uniformly among the items the user did not interact with.

        Items are drawn uniformly from all items and only the draws that hit an observed item are
        redrawn; draws still colliding after ``max_rounds`` rounds (users who saw almost every
        item) are drawn exactly from their complement.

        Args:
            users: ``(B,)`` user ids.
            generator: Random generator on the device of the data.
            max_rounds: Rejection rounds before the exact fallback.

        Returns:
            ``(B,)`` item ids, none of them observed for its user.
        """
        users = users.to(self.device)
        if self._saturated_user is not None:
            full = self.user_counts()[users] >= self.n_items
            if bool(full.any()):
                user = int(users[full][0])
                raise ValueError(
                    f"user {user} has interacted with every item: no negative item exists."
                )
        negatives = torch.randint(
            self.n_items, users.shape, device=self.device, generator=generator
        )
        bad = self.contains(users, negatives).nonzero().squeeze(-1)
        for _ in range(max_rounds):
            if bad.numel() == 0:
                return negatives
            redraw = torch.randint(self.n_items, bad.shape, device=self.device, generator=generator)
            negatives[bad] = redraw
            bad = bad[self.contains(users[bad], redraw)]
        if bad.numel() > 0:
            allowed = ~self.exclusion_mask(users[bad])
            negatives[bad] = torch.multinomial(allowed.float(), 1, generator=generator).squeeze(-1)
        return negatives

    def batches(
        self, batch_size: int, generator: torch.Generator | None = None
    ) -> list[tuple[Tensor, Tensor, Tensor]]:
        """One epoch of ``(users, positives, negatives)`` batches.

        Every interaction is a positive exactly once, in a random order; each gets a fresh
        negative from :meth:`sample_negatives`.

        Args:
            batch_size: Pairs per batch (the last batch may be smaller).
            generator: Random generator on the device of the data.

        Returns:
            A list of ``(users, positive items, negative items)`` triples of ``(B,)`` tensors.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
        order = torch.randperm(len(self), device=self.device, generator=generator)
        users, positives = self.users[order], self.items[order]
        negatives = self.sample_negatives(users, generator)
        return [
            (u, p, n)
            for u, p, n in zip(
                users.split(batch_size),
                positives.split(batch_size),
                negatives.split(batch_size),
                strict=True,
            )
        ]


@dataclass
class LeaveOneOutSplit:
    """A leave-one-out split.

    Attributes:
        train: The training interactions.
        users: ``(T,)`` the users with a held-out interaction.
        items: ``(T,)`` their held-out items (not in ``train``).
    """

    train: ImplicitFeedback
    users: Tensor
    items: Tensor


def leave_one_out(
    data: ImplicitFeedback, seed: int = 0, by: str = "random", min_interactions: int = 2
) -> LeaveOneOutSplit:
    """Hold out one interaction of every user with at least ``min_interactions`` of them.

    Args:
        data: The interactions.
        seed: Seed of the random choice (and of tie-breaking with ``by="latest"``).
        by: ``"random"`` (uniform over the user's interactions) or ``"latest"`` (largest
            timestamp; needs ``data.timestamps``).
        min_interactions: Users with fewer interactions keep all of them for training.

    Returns:
        A :class:`LeaveOneOutSplit`.
    """
    if by not in ("random", "latest"):
        raise ValueError(f"by must be 'random' or 'latest', got {by!r}.")
    if by == "latest" and data.timestamps is None:
        raise ValueError("by='latest' needs interactions with timestamps.")
    if min_interactions < 2:
        raise ValueError(f"min_interactions must be at least 2, got {min_interactions}.")
    generator = torch.Generator().manual_seed(seed)
    noise = torch.rand(len(data), generator=generator, dtype=torch.float64).to(data.device)
    # Order by (user, key): the held-out one is the last of each user's group.
    order = torch.argsort(noise, stable=True)
    if by == "latest":
        order = order[torch.argsort(data.timestamps[order], stable=True)]
    order = order[torch.argsort(data.users[order], stable=True)]
    counts = data.user_counts()
    eligible = (counts >= min_interactions).nonzero().squeeze(-1)
    held = order[data.indptr[eligible + 1] - 1]
    keep = torch.ones(len(data), dtype=torch.bool, device=data.device)
    keep[held] = False
    timestamps = None if data.timestamps is None else data.timestamps[keep]
    train = ImplicitFeedback(data.pairs[keep], data.n_users, data.n_items, timestamps)
    return LeaveOneOutSplit(train=train, users=data.users[held], items=data.items[held])


# ---------------------------------------------------------------------------- models
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


# ---------------------------------------------------------------------------- training
def fit_implicit(
    model: LFPL,
    data: ImplicitFeedback,
    *,
    epochs: int = 50,
    batch_size: int = 4096,
    lr: float | None = None,
    reg: float = 1e-3,
    method: str = "joint",
    optimizer: str = "adagrad",
    validation: ImplicitFeedback | None = None,
    patience: int = 5,
    min_delta: float = 1e-4,
    sparse: bool = False,
    seed: int = 0,
    progress: bool = False,
) -> FitResult:
    r"""Fit LFPL/IF: every interaction against a fresh unobserved item, each epoch.

    The mini-batch objective is the mean of the pair losses plus the usual BPR penalty on the
    factors the batch touches,

    .. math::

        \frac{1}{|B|} \sum_{(u, i, j) \in B} \Big(\operatorname{softplus}(U_u^\top (V_j - V_i))
            + \frac{\lambda}{2}\big(\lVert U_u\rVert^2 + \lVert V_i\rVert^2
            + \lVert V_j\rVert^2\big)\Big).

    Args:
        model: An :class:`LFPL` with ``n_rows = data.n_users`` and ``n_cols = data.n_items``.
        data: Training interactions.
        epochs: Maximum number of passes over the interactions.
        batch_size: Pairs per mini-batch.
        lr: Learning rate (default: 0.1 for AdaGrad, 0.01 for Adam).
        reg: Penalty weight ``lambda``.
        method: ``"joint"`` (one step on both factors) or ``"alternating"`` (``U``, then ``V``).
        optimizer: ``"adagrad"`` or ``"adam"``.
        validation: Optional held-out interactions for early stopping; their loss is the mean
            pair loss against one fixed negative each (unobserved in training and validation).
        patience: Epochs without a validation improvement above ``min_delta`` before stopping.
        min_delta: Smallest improvement that counts.
        sparse: Use sparse gradients (for very many users or items).
        seed: Seed of the shuffling and of the negatives.
        progress: Show a progress bar (only on a terminal).

    Returns:
        A :class:`FitResult`; the model's ``seen_rows``/``seen_cols`` mark the users and items of
        ``data``.
    """
    _check_common(method, epochs, batch_size, lr, reg, patience)
    if optimizer not in ("adagrad", "adam"):
        raise ValueError(f"optimizer must be 'adagrad' or 'adam', got {optimizer!r}.")
    if (data.n_users, data.n_items) != (model.n_rows, model.n_cols):
        raise ValueError(
            f"the data have {data.n_users} users and {data.n_items} items, the model "
            f"{model.n_rows} rows and {model.n_cols} columns."
        )
    device = model.U.device
    data = data.to(device) if data.device != device else data
    generator = torch.Generator(device=device).manual_seed(seed)

    def batch_loss(U: Tensor, V: Tensor, batch: tuple[Tensor, Tensor, Tensor]) -> Tensor:
        users, positives, negatives = batch
        u = _gather(U, users, sparse)
        v_pos, v_neg = _gather(V, positives, sparse), _gather(V, negatives, sparse)
        scores = torch.stack([(u * v_pos).sum(-1), (u * v_neg).sum(-1)], dim=-1)
        nll = plackett_luce_nll(scores, validate=False)
        penalty = u.square().sum() + v_pos.square().sum() + v_neg.square().sum()
        return (nll + 0.5 * reg * penalty) / users.shape[0]

    val_loss = None
    if validation is not None:
        if (validation.n_users, validation.n_items) != (data.n_users, data.n_items):
            raise ValueError("validation must have the same users and items as data.")
        validation = validation.to(device)
        both = ImplicitFeedback(
            torch.cat([data.pairs, validation.pairs]), data.n_users, data.n_items
        )
        val_gen = torch.Generator(device=device).manual_seed(seed + 1)
        val_users, val_pos = validation.users, validation.items
        val_neg = both.sample_negatives(val_users, val_gen)

        @torch.no_grad()
        def val_loss() -> float:
            scores = torch.stack([model(val_users, val_pos), model(val_users, val_neg)], dim=-1)
            return float(plackett_luce_nll(scores, reduction="mean", validate=False))

    result = _train(
        model,
        lambda epoch: data.batches(batch_size, generator),
        batch_loss,
        val_loss,
        method=method,
        optimizer=optimizer,
        epochs=epochs,
        lr=lr,
        patience=patience,
        min_delta=min_delta,
        sparse=sparse,
        progress=progress,
        desc="fit_implicit",
    )
    model.seen_rows[data.users] = True
    model.seen_cols[data.items] = True
    return result
