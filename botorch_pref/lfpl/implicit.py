r"""LFPL with implicit feedback (LFPL/IF): observed interactions ranked above unobserved ones.

An observed interaction :math:`(u, i)` and :math:`L` items :math:`j_1, \dots, j_L` that user
:math:`u` never interacted with give a top-1 dyad ranking: :math:`(u, i)` is chosen first among
the :math:`L + 1` dyads :math:`(u, i), (u, j_1), \dots, (u, j_L)`. Its Plackett-Luce negative
log-likelihood is

.. math::

    -\log \frac{e^{U_u^\top V_i}}{e^{U_u^\top V_i} + \sum_{l=1}^{L} e^{U_u^\top V_{j_l}}},

which for :math:`L = 1` is :math:`\operatorname{softplus}(U_u^\top (V_j - V_i))`, the BPR loss.
Training draws batches of thousands of such examples (:func:`fit_implicit`); negatives are drawn
uniformly and only the draws that hit an observed item are redrawn (membership is a bitmap
lookup, or a binary search in the sorted interaction keys ``u * n_items + i`` for large data,
all in torch, on the device of the data), the last collisions exactly from the user's
unobserved items.

Evaluation follows the leave-one-out protocol: one interaction per user is held out, and the
held-out item is compared with every item the user never interacted with.
"""

from __future__ import annotations

import copy
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from botorch_pref.lfpl.fused import RowAdagrad, choice_step, hardest_negatives
from botorch_pref.lfpl.metrics import heldout_item_metrics
from botorch_pref.lfpl.model import LFPL
from botorch_pref.lfpl.plackett_luce import plackett_luce_nll
from botorch_pref.lfpl.runtime import lfpl_threads
from botorch_pref.lfpl.training import (
    FitResult,
    _check_common,
    _check_int,
    _check_number,
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

BITMAP_LIMIT = 2**26


def _as_id_tensor(ids: object, name: str) -> Tensor:
    """``ids`` as an integer tensor; fractional, boolean or complex ids raise naming one."""
    if not isinstance(ids, Tensor):
        try:
            ids = torch.as_tensor(ids)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(
                f"{name} must be integer ids, got {type(ids).__name__}: {err}"
            ) from None
    if ids.dtype == torch.bool or ids.is_complex():
        raise TypeError(f"{name} must be integer ids, got dtype {ids.dtype}.")
    if ids.is_floating_point():
        fractional = (ids != ids.round()) | ~torch.isfinite(ids)
        if bool(fractional.any()):
            bad = ids[fractional][0].item()
            raise ValueError(f"{name} must be integers, got {bad}.")
        raise ValueError(f"{name} must be integers, got dtype {ids.dtype} (convert with .long()).")
    return ids


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
        pairs = _as_id_tensor(pairs, "pairs")
        if pairs.dim() != 2 or pairs.shape[1] != 2:
            raise ValueError(f"pairs must have shape (n, 2), got {tuple(pairs.shape)}.")
        if pairs.shape[0] == 0:
            raise ValueError("no interactions.")
        pairs = pairs.long()
        users, items = pairs[:, 0], pairs[:, 1]
        for name, value in (("n_users", n_users), ("n_items", n_items)):
            if value is not None:
                _check_int(name, value, 1)
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
            if timestamps.is_complex() or timestamps.dtype == torch.bool:
                raise TypeError(f"timestamps must be real numbers, got dtype {timestamps.dtype}.")
            if timestamps.is_floating_point():
                bad = (~torch.isfinite(timestamps)).nonzero()
                if bad.numel() > 0:
                    n = int(bad[0, 0])
                    raise ValueError(
                        f"interaction {n}: timestamp {float(timestamps[n])} is not finite."
                    )
            latest = torch.full(self.keys.shape, torch.iinfo(torch.long).min).to(timestamps)
            if timestamps.is_floating_point():
                latest.fill_(-torch.inf)
            self.timestamps = latest.scatter_reduce(0, inverse, timestamps, reduce="amax")
        counts = torch.bincount(self.users, minlength=self.n_users)
        self.indptr = torch.zeros(self.n_users + 1, dtype=torch.long, device=pairs.device)
        self.indptr[1:] = torch.cumsum(counts, 0)
        self._shifted_keys: Tensor | None = None
        self._bitmap: Tensor | None = None
        if self.n_users * self.n_items <= BITMAP_LIMIT:
            self._bitmap = torch.zeros(
                self.n_users * self.n_items, dtype=torch.bool, device=pairs.device
            )
            self._bitmap[self.keys] = True
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
        """Whether each ``(users[k], items[k])`` was observed (same shape).

        A lookup in a ``n_users * n_items`` bitmap when that has at most ``2**26`` entries, a
        binary search in the sorted keys otherwise.
        """
        query = users * self.n_items + items
        if self._bitmap is not None:
            return self._bitmap[query]
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
        self, users: Tensor, generator: torch.Generator | None = None, max_rounds: int = 4
    ) -> Tensor:
        r"""Draw, for each user, an item uniformly among the items the user did not interact with.

        Items are drawn uniformly from all items and only the draws that hit an observed item are
        redrawn; draws still colliding after ``max_rounds`` rounds (users who saw most items)
        are drawn exactly from their complement: with the user's observed items
        :math:`o_0 < o_1 < \dots` and :math:`r` uniform on the number of unobserved items, the
        :math:`r`-th unobserved item is :math:`r + \#\{i : o_i - i \le r\}` (a binary search).

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
            negatives[bad] = self._sample_complement(users[bad], generator)
        return negatives

    def _sample_complement(self, users: Tensor, generator: torch.Generator | None) -> Tensor:
        """Exact uniform draws from each user's unobserved items (see :meth:`sample_negatives`)."""
        if self._shifted_keys is None:
            local = torch.arange(len(self), device=self.device) - self.indptr[self.users]
            self._shifted_keys = self.users * (self.n_items + 1) + (self.items - local)
        free = self.n_items - self.user_counts()[users]
        uniform = torch.rand(
            users.shape, generator=generator, device=self.device, dtype=torch.float64
        )
        r = torch.minimum((uniform * free).long(), free - 1)
        query = users * (self.n_items + 1) + r
        below = torch.searchsorted(self._shifted_keys, query, right=True) - self.indptr[users]
        return r + below

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
    _check_int("k", k, 1)
    _check_int("batch_size", batch_size, 1)
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


# ---------------------------------------------------------------------------- training
NEGATIVE_SAMPLERS = ("uniform", "hard")
LR_SCHEDULES = ("constant", "linear")


def fit_implicit(
    model: LFPL,
    data: ImplicitFeedback,
    *,
    epochs: int = 25,
    batch_size: int = 4096,
    n_negatives: int = 5,
    negatives: str = "uniform",
    candidates: int | None = None,
    lr: float | None = None,
    lr_schedule: str = "constant",
    reg: float = 0.03,
    method: str = "alternating",
    optimizer: str = "adagrad",
    validation: ImplicitFeedback | None = None,
    patience: int = 5,
    min_delta: float = 1e-4,
    sparse: bool = False,
    seed: int = 0,
    progress: bool = False,
    threads: int | str | None = "auto",
    process_group: Any = None,
) -> FitResult:
    r"""Fit LFPL/IF: every interaction chosen against fresh unobserved items, each epoch.

    Each interaction :math:`(u, p)` is one example per epoch, with :math:`L` =
    ``n_negatives`` items :math:`n_1, \dots, n_L` that ``u`` never interacted with; its loss is
    the Plackett-Luce probability that :math:`(u, p)` comes first among the :math:`L + 1`
    dyads (a top-1 ranking; :math:`L = 1` is the BPR pair loss). The mini-batch objective is the
    mean over the batch of

    .. math::

        \log\Big(e^{U_u^\top V_p} + \sum_l e^{U_u^\top V_{n_l}}\Big) - U_u^\top V_p
            + \frac{\lambda}{2}\Big(\lVert U_u\rVert^2 + \lVert V_p\rVert^2
            + \sum_l \lVert V_{n_l}\rVert^2\Big).

    With ``optimizer="adagrad"`` the steps use hand-derived gradients and AdaGrad on the rows a
    batch touches (:mod:`botorch_pref.lfpl.fused`): no autograd, no host synchronisation within
    an epoch, the negatives of an epoch drawn at once; ``"adam"`` runs the same objective
    through autograd and ``torch.optim.Adam``.

    Args:
        model: An :class:`LFPL` with ``n_rows = data.n_users`` and ``n_cols = data.n_items``;
            training runs on its device.
        data: Training interactions.
        epochs: Maximum number of passes over the interactions.
        batch_size: Interactions per mini-batch (per process with ``process_group``).
        n_negatives: Unobserved items ``L`` each interaction is chosen against (drawn
            independently, so repeats are possible).
        negatives: ``"uniform"`` (uniform over each user's unobserved items) or ``"hard"``
            (of ``candidates`` uniform draws keep the ``L`` the current model scores highest).
        candidates: Draws per interaction for ``negatives="hard"`` (default ``4 L``).
        lr: Learning rate (default: 0.1 for AdaGrad, 0.01 for Adam).
        lr_schedule: ``"constant"`` or ``"linear"`` (decays to zero over ``epochs``).
        reg: Penalty weight ``lambda``.
        method: ``"alternating"`` (a step on ``U`` with ``V`` fixed, then on ``V`` with the new
            ``U``, as in the LFPL paper) or ``"joint"`` (both from the same gradients).
        optimizer: ``"adagrad"`` or ``"adam"``.
        validation: Optional held-out interactions for early stopping; their loss is the mean
            pair loss against one fixed negative each (unobserved in training and validation).
        patience: Epochs without a validation improvement above ``min_delta`` before stopping.
        min_delta: Smallest improvement that counts.
        sparse: Sparse gradients for the Adam path (the AdaGrad path is always row-sparse).
        seed: Seed of the shuffling and of the negatives.
        progress: Show a progress bar (only on a terminal).
        threads: CPU intra-op threads during the fit: ``"auto"`` (see
            :mod:`botorch_pref.lfpl.runtime`), a number, or ``None`` for torch's setting.
        process_group: Data-parallel training (see :mod:`botorch_pref.lfpl.distributed`): a
            ``torch.distributed`` process group, or ``"default"`` for the default group. Each
            process passes the interactions of its own users; ``U`` rows of other processes'
            users are not trained here.

    Returns:
        A :class:`FitResult` (with AdaGrad its ``train_loss`` is the mean choice negative
        log-likelihood per interaction before each step, without the penalty); the model's
        ``seen_rows``/``seen_cols`` mark the users and items of ``data``.
    """
    _check_common(method, epochs, batch_size, lr, reg, patience)
    _check_fit_options(n_negatives, negatives, candidates, lr_schedule, min_delta)
    if optimizer not in ("adagrad", "adam"):
        raise ValueError(f"optimizer must be 'adagrad' or 'adam', got {optimizer!r}.")
    if not isinstance(model, LFPL):
        raise TypeError(f"model must be an LFPL, got {type(model).__name__}.")
    if not isinstance(data, ImplicitFeedback):
        raise TypeError(f"data must be an ImplicitFeedback, got {type(data).__name__}.")
    if (data.n_users, data.n_items) != (model.n_rows, model.n_cols):
        raise ValueError(
            f"the data have {data.n_users} users and {data.n_items} items, the model "
            f"{model.n_rows} rows and {model.n_cols} columns."
        )
    if optimizer == "adam" and process_group is not None:
        raise ValueError("data-parallel training (process_group) needs optimizer='adagrad'.")
    if negatives == "hard" and optimizer == "adam":
        raise ValueError("negatives='hard' needs optimizer='adagrad'.")
    if validation is not None and not isinstance(validation, ImplicitFeedback):
        raise TypeError(
            f"validation must be an ImplicitFeedback or None, got {type(validation).__name__}."
        )
    n_candidates = n_negatives if negatives == "uniform" else candidates or 4 * n_negatives
    device = model.U.device
    data = data.to(device) if data.device != device else data
    generator = torch.Generator(device=device).manual_seed(seed)
    val_loss = _validation_loss(model, data, validation, seed) if validation is not None else None
    with lfpl_threads(threads, device) as n_threads:
        if optimizer == "adam":
            result = _fit_autograd(
                model, data, generator, val_loss, epochs, batch_size, n_negatives, lr, reg,
                method, patience, min_delta, sparse, progress,
            )  # fmt: skip
        else:
            result = _fit_fused(
                model, data, generator, val_loss, epochs, batch_size, n_negatives, n_candidates,
                0.1 if lr is None else lr, lr_schedule, reg, method == "alternating", patience,
                min_delta, progress, process_group,
            )  # fmt: skip
    result.threads = n_threads
    model.seen_rows[data.users] = True
    model.seen_cols[data.items] = True
    return result


def _check_fit_options(
    n_negatives: int, negatives: str, candidates: int | None, lr_schedule: str, min_delta: float
) -> None:
    _check_int("n_negatives", n_negatives, 1)
    if negatives not in NEGATIVE_SAMPLERS:
        raise ValueError(f"negatives must be one of {NEGATIVE_SAMPLERS}, got {negatives!r}.")
    if candidates is not None:
        _check_int("candidates", candidates, n_negatives)
    if lr_schedule not in LR_SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {lr_schedule!r}.")
    _check_number("min_delta", min_delta, positive=False)


def _validation_loss(
    model: LFPL, data: ImplicitFeedback, validation: ImplicitFeedback, seed: int
) -> Callable[[], float]:
    device = model.U.device
    if (validation.n_users, validation.n_items) != (data.n_users, data.n_items):
        raise ValueError(
            f"validation has {validation.n_users} users and {validation.n_items} items, the "
            f"data {data.n_users} and {data.n_items}."
        )
    validation = validation.to(device)
    both = ImplicitFeedback(torch.cat([data.pairs, validation.pairs]), data.n_users, data.n_items)
    val_gen = torch.Generator(device=device).manual_seed(seed + 1)
    val_users, val_pos = validation.users, validation.items
    val_neg = both.sample_negatives(val_users, val_gen)

    @torch.no_grad()
    def val_loss() -> float:
        scores = torch.stack([model(val_users, val_pos), model(val_users, val_neg)], dim=-1)
        return float(plackett_luce_nll(scores, reduction="mean", validate=False))

    return val_loss


def _epoch_examples(
    data: ImplicitFeedback, n_candidates: int, generator: torch.Generator
) -> tuple[Tensor, Tensor, Tensor]:
    """One epoch's shuffled ``(users, positives, candidate negatives (n, C))``, drawn at once."""
    n = len(data)
    order = torch.randperm(n, device=data.device, generator=generator)
    users, positives = data.users[order], data.items[order]
    flat = data.sample_negatives(users.repeat_interleave(n_candidates), generator)
    return users, positives, flat.view(n, n_candidates)


def _fit_fused(
    model: LFPL,
    data: ImplicitFeedback,
    generator: torch.Generator,
    val_loss: Callable[[], float] | None,
    epochs: int,
    batch_size: int,
    n_negatives: int,
    n_candidates: int,
    lr: float,
    lr_schedule: str,
    reg: float,
    alternating: bool,
    patience: int,
    min_delta: float,
    progress: bool,
    process_group: Any,
) -> FitResult:
    from tqdm.auto import tqdm

    from botorch_pref.lfpl.distributed import GroupSync

    sync = GroupSync(process_group, model.U.device) if process_group is not None else None
    n_local = len(data)
    # Every process takes the same number of steps per epoch (collectives must match).
    n_max = sync.max_int(n_local) if sync is not None else n_local
    n_steps = max(1, -(-n_max // batch_size))
    total_steps = n_steps * epochs
    opt_u, opt_v = RowAdagrad(model.U.data), RowAdagrad(model.V.data)
    reduce_v = sync.sum_ if sync is not None else None
    result = FitResult()
    best, waited, best_state = math.inf, 0, None
    start = time.perf_counter()
    show = progress and sys.stderr.isatty() and (sync is None or sync.rank == 0)
    bar = tqdm(range(epochs), desc="fit_implicit", disable=not show)
    step = 0
    for epoch in bar:
        users, positives, candidates = _epoch_examples(data, n_candidates, generator)
        total = torch.zeros((), dtype=model.U.dtype, device=model.U.device)
        for u, p, c in zip(
            torch.tensor_split(users, n_steps),
            torch.tensor_split(positives, n_steps),
            torch.tensor_split(candidates, n_steps),
            strict=True,
        ):
            rate = lr if lr_schedule == "constant" else lr * (1.0 - step / total_steps)
            step += 1
            if n_candidates > n_negatives:
                c = hardest_negatives(opt_u.table, opt_v.table, u, c, n_negatives)
            if u.shape[0] == 0:
                # A process with fewer interactions still joins the reduction.
                if reduce_v is not None:
                    reduce_v(opt_v.grad)
                    opt_v.apply(None, rate)
                continue
            total += choice_step(opt_u, opt_v, u, p, c, reg, rate, alternating, reduce_v)
        if sync is not None:
            epoch_loss = sync.mean_loss(total, n_local)
        else:
            epoch_loss = float(total) / max(n_local, 1)
        if not math.isfinite(epoch_loss):
            raise ValueError(
                f"the training loss became {epoch_loss} at epoch {epoch}: lower lr or raise reg."
            )
        result.train_loss.append(epoch_loss)
        result.epochs_run = epoch + 1
        postfix = {"loss": f"{epoch_loss:.4f}"}
        if val_loss is not None:
            current = val_loss()
            result.val_loss.append(current)
            postfix["val"] = f"{current:.4f}"
            if current < best - min_delta:
                best, waited, result.best_epoch = current, 0, epoch
                best_state = copy.deepcopy(model.state_dict())
            else:
                waited += 1
                if waited >= patience:
                    result.stopped_early = epoch + 1 < epochs
                    break
        bar.set_postfix(postfix)
    bar.close()
    if best_state is not None:
        model.load_state_dict(best_state)
    elif val_loss is None:
        result.best_epoch = result.epochs_run - 1
    model.eval()
    result.seconds = time.perf_counter() - start
    result.threads = torch.get_num_threads()
    return result


def _fit_autograd(
    model: LFPL,
    data: ImplicitFeedback,
    generator: torch.Generator,
    val_loss: Callable[[], float] | None,
    epochs: int,
    batch_size: int,
    n_negatives: int,
    lr: float | None,
    reg: float,
    method: str,
    patience: int,
    min_delta: float,
    sparse: bool,
    progress: bool,
) -> FitResult:
    def batches(epoch: int) -> list[tuple[Tensor, Tensor, Tensor]]:
        users, positives, negatives = _epoch_examples(data, n_negatives, generator)
        return list(
            zip(
                users.split(batch_size),
                positives.split(batch_size),
                negatives.split(batch_size),
                strict=True,
            )
        )

    def batch_loss(U: Tensor, V: Tensor, batch: tuple[Tensor, Tensor, Tensor]) -> Tensor:
        users, positives, negatives = batch
        u = _gather(U, users, sparse)
        v_pos, v_neg = _gather(V, positives, sparse), _gather(V, negatives, sparse)
        scores = torch.cat(
            [(u * v_pos).sum(-1, keepdim=True), torch.bmm(v_neg, u.unsqueeze(-1)).squeeze(-1)],
            dim=-1,
        )
        nll = plackett_luce_nll(scores, top_k=1, validate=False)
        penalty = u.square().sum() + v_pos.square().sum() + v_neg.square().sum()
        return (nll + 0.5 * reg * penalty) / users.shape[0]

    return _train(
        model,
        batches,
        batch_loss,
        val_loss,
        method=method,
        optimizer="adam",
        epochs=epochs,
        lr=lr,
        patience=patience,
        min_delta=min_delta,
        sparse=sparse,
        progress=progress,
        desc="fit_implicit",
    )
