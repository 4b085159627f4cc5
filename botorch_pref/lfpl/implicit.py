r"""LFPL with implicit feedback (LFPL/IF): observed interactions ranked above unobserved ones.

An observed interaction :math:`(u, i)` and :math:`L` items :math:`j_1, \dots, j_L` that user
:math:`u` never interacted with give a top-1 dyad ranking: :math:`(u, i)` is chosen first among
the :math:`L + 1` dyads :math:`(u, i), (u, j_1), \dots, (u, j_L)`. Its Plackett-Luce negative
log-likelihood is

.. math::

    -\log \frac{e^{U_u^\top V_i}}{e^{U_u^\top V_i} + \sum_{l=1}^{L} e^{U_u^\top V_{j_l}}},

which for :math:`L = 1` is :math:`\operatorname{softplus}(U_u^\top (V_j - V_i))`, the BPR loss.
Training draws batches of thousands of such examples (:func:`fit_implicit`), the unobserved
items of an epoch at once (:meth:`~botorch_pref.lfpl.feedback.ImplicitFeedback.sample_negatives`),
and steps with hand-derived gradients (:mod:`botorch_pref.lfpl.fused`).

The interactions, the sampling and the leave-one-out split live in
:mod:`botorch_pref.lfpl.feedback`, the evaluation in :mod:`botorch_pref.lfpl.evaluation`; both
are re-exported here.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from botorch_pref.lfpl.collectives import GroupSync
from botorch_pref.lfpl.dyads import check_int
from botorch_pref.lfpl.evaluation import (
    EvaluationResult,
    ItemScorer,
    MostPopular,
    Random,
    evaluate,
)
from botorch_pref.lfpl.factor_model import LFPL
from botorch_pref.lfpl.feedback import ImplicitFeedback, LeaveOneOutSplit, leave_one_out
from botorch_pref.lfpl.fused import RowAdagrad, choice_step, hardest_negatives
from botorch_pref.lfpl.openmp import lfpl_threads
from botorch_pref.lfpl.plackett_luce import plackett_luce_nll
from botorch_pref.lfpl.training import (
    EpochLoop,
    FitResult,
    check_fit_settings,
    check_number,
    gather_rows,
    train_epochs,
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

NEGATIVE_SAMPLERS = ("uniform", "hard")
LR_SCHEDULES = ("constant", "linear")


def fit_implicit(
    model: LFPL,
    data: ImplicitFeedback,
    *,
    epochs: int = 16,
    batch_size: int = 4096,
    n_negatives: int = 5,
    negatives: str = "uniform",
    candidates: int | None = None,
    lr: float | None = None,
    lr_schedule: str = "linear",
    reg: float = 0.03,
    method: str = "joint",
    optimizer: str = "adagrad",
    validation: ImplicitFeedback | None = None,
    patience: int = 5,
    min_delta: float = 1e-4,
    sparse: bool = False,
    seed: int = 0,
    progress: bool = False,
    threads: int | str | None = "auto",
    prefetch: bool = False,
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
        lr: Learning rate (default for AdaGrad: 0.3 with the linear schedule, 0.1 with the
            constant one; 0.01 for Adam).
        lr_schedule: ``"linear"`` (AdaGrad's rate decays linearly to zero over ``epochs``) or
            ``"constant"``; the Adam path keeps its rate constant. On MovieLens-100K 16 epochs
            from 0.3 down to zero reached the AUC of 25 constant-rate epochs at 0.1
            (``benchmarks/RESULTS-lfpl.md``).
        reg: Penalty weight ``lambda``.
        method: ``"joint"`` (both factors step from the same gradients) or ``"alternating"``
            (a step on ``U`` with ``V`` fixed, then on ``V`` with the new ``U``, as in the LFPL
            paper: it scores every batch twice, so it costs more per step; on MovieLens it
            reached the same ranking quality).
        optimizer: ``"adagrad"`` or ``"adam"``.
        validation: Optional held-out interactions for early stopping; their loss is the mean
            pair loss against one fixed negative each (unobserved in training and validation).
        patience: Epochs without a validation improvement above ``min_delta`` before stopping.
        min_delta: Smallest improvement that counts.
        sparse: Sparse gradients for the Adam path (the AdaGrad path is always row-sparse).
        seed: Seed of the shuffling and of the negatives.
        progress: Show a progress bar (only on a terminal).
        threads: CPU intra-op threads during the fit: ``"auto"`` (see
            :mod:`botorch_pref.lfpl.openmp`), a number, or ``None`` for torch's setting.
        prefetch: On the CPU, with ``optimizer="adagrad"``: draw the next epoch's batches on a
            second (Python) thread while an epoch trains. The batches, and so the fit, are the
            same as without it. It pays only where a core is free: on MovieLens-100K it took
            about a quarter off a fit on an idle 2-core machine, and made fits 15 % slower
            while other jobs kept both cores busy (``benchmarks/RESULTS-lfpl.md``).
        process_group: Data-parallel training (see :mod:`botorch_pref.lfpl.distributed`): a
            ``torch.distributed`` process group, or ``"default"`` for the default group. Each
            process passes the interactions of its own users; ``U`` rows of other processes'
            users are not trained here.

    Returns:
        A :class:`FitResult` (with AdaGrad its ``train_loss`` is the mean choice negative
        log-likelihood per interaction before each step, without the penalty); the model's
        ``seen_rows``/``seen_cols`` mark the users and items of ``data``.
    """
    check_fit_settings(method, epochs, batch_size, lr, reg, patience)
    _check_fit_options(n_negatives, negatives, candidates, lr_schedule, min_delta)
    _check_fit_inputs(model, data, validation, optimizer, negatives, process_group)
    n_candidates = n_negatives if negatives == "uniform" else candidates or 4 * n_negatives
    device = model.U.device
    data = data.to(device) if data.device != device else data
    generator = torch.Generator(device=device).manual_seed(seed)
    val_loss = _validation_loss(model, data, validation, seed) if validation is not None else None
    settings = _Settings(
        epochs, batch_size, n_negatives, n_candidates, lr, lr_schedule, reg, method, patience,
        min_delta, sparse, progress,
    )  # fmt: skip
    with lfpl_threads(threads, device) as n_threads:
        if optimizer == "adam":
            result = _fit_autograd(model, data, generator, val_loss, settings)
        else:
            settings.prefetch = bool(prefetch) and device.type == "cpu"
            result = _fit_fused(model, data, generator, val_loss, settings, process_group)
    result.threads = n_threads
    model.seen_rows[data.users] = True
    model.seen_cols[data.items] = True
    return result


def _check_fit_options(
    n_negatives: int, negatives: str, candidates: int | None, lr_schedule: str, min_delta: float
) -> None:
    check_int("n_negatives", n_negatives, 1)
    if negatives not in NEGATIVE_SAMPLERS:
        raise ValueError(f"negatives must be one of {NEGATIVE_SAMPLERS}, got {negatives!r}.")
    if candidates is not None:
        check_int("candidates", candidates, n_negatives)
    if lr_schedule not in LR_SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {lr_schedule!r}.")
    check_number("min_delta", min_delta, positive=False)


def _check_fit_inputs(
    model: object,
    data: object,
    validation: object,
    optimizer: str,
    negatives: str,
    process_group: Any,
) -> None:
    """Raise on arguments of :func:`fit_implicit` of the wrong type or that do not fit together."""
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


def _epoch_batches(
    data: ImplicitFeedback, n_candidates: int, generator: torch.Generator, n_steps: int
) -> list[tuple[Tensor, Tensor]]:
    """One epoch's ``(users (b,), items (b, 1 + C))`` in ``n_steps`` batches.

    Every interaction is a positive once, in a random order, in the first column of
    ``items``, followed by ``C`` candidate negatives; the negatives of the whole epoch are
    drawn at once. The batches differ in size by at most one (some are empty when there are
    fewer interactions than steps).
    """
    n = len(data)
    order = torch.randperm(n, device=data.device, generator=generator)
    users, positives = data.users.index_select(0, order), data.items.index_select(0, order)
    flat = data.sample_negatives(users.repeat_interleave(n_candidates), generator)
    items = torch.cat([positives.unsqueeze(-1), flat.view(n, n_candidates)], dim=-1)
    parts = torch.tensor_split(users, n_steps), torch.tensor_split(items, n_steps)
    return list(zip(*parts, strict=True))


def _epochs_of_batches(
    draw: Callable[[], list[tuple[Tensor, Tensor]]], epochs: int, prefetch: bool
) -> Iterator[list[tuple[Tensor, Tensor]]]:
    """``draw()`` for each of ``epochs`` epochs, in order; with ``prefetch`` on a second thread.

    With ``prefetch`` the next epoch is drawn by one worker thread while the caller trains on
    the current one (torch's kernels release the GIL). The draws still run one after the other,
    in epoch order, so a seeded generator gives the same batches as without ``prefetch``; at
    most one epoch is drawn ahead, and closing the iterator early (early stopping) waits for
    that draw and discards it.
    """
    if not prefetch:
        for _ in range(epochs):
            yield draw()
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="lfpl-batches") as pool:
        pending = pool.submit(draw)
        for epoch in range(epochs):
            batches = pending.result()
            if epoch + 1 < epochs:
                pending = pool.submit(draw)
            yield batches


def _learning_rates(lr: float, schedule: str, total_steps: int) -> Iterator[float]:
    """The learning rate of every step: constant, or decaying linearly to zero."""
    if schedule == "constant":
        return itertools.repeat(lr)
    return (lr * (1.0 - step / total_steps) for step in range(total_steps))


@dataclass
class _Settings:
    """The checked settings of one :func:`fit_implicit` call (see its arguments)."""

    epochs: int
    batch_size: int
    n_negatives: int
    n_candidates: int
    lr: float | None
    lr_schedule: str
    reg: float
    method: str
    patience: int
    min_delta: float
    sparse: bool
    progress: bool
    prefetch: bool = False


def _fit_fused(
    model: LFPL,
    data: ImplicitFeedback,
    generator: torch.Generator,
    val_loss: Callable[[], float] | None,
    s: _Settings,
    process_group: Any,
) -> FitResult:
    sync = GroupSync(process_group, model.U.device) if process_group is not None else None
    n_local = len(data)
    # Every process takes the same number of steps per epoch (collectives must match).
    n_max = sync.max_int(n_local) if sync is not None else n_local
    n_steps = max(1, -(-n_max // s.batch_size))
    lr = s.lr if s.lr is not None else 0.3 if s.lr_schedule == "linear" else 0.1
    rates = _learning_rates(lr, s.lr_schedule, n_steps * s.epochs)
    opt_u, opt_v = RowAdagrad(model.U.data), RowAdagrad(model.V.data)
    reduce_v = sync.sum_ if sync is not None else None
    show = s.progress and sys.stderr.isatty() and (sync is None or sync.rank == 0)
    loop = EpochLoop(model, s.epochs, val_loss, s.patience, s.min_delta, "fit_implicit", show)
    alternating = s.method == "alternating"
    draws = _epochs_of_batches(
        lambda: _epoch_batches(data, s.n_candidates, generator, n_steps), s.epochs, s.prefetch
    )
    with closing(draws):
        for epoch, batches in zip(loop, draws, strict=False):
            total = _fused_epoch(opt_u, opt_v, batches, rates, s, alternating, reduce_v)
            if sync is not None:
                epoch_loss = sync.mean_loss(total, n_local)
            else:
                epoch_loss = float(total) / max(n_local, 1)
            if loop.end_epoch(epoch, epoch_loss):
                break
    return loop.finish()


def _fused_epoch(
    opt_u: RowAdagrad,
    opt_v: RowAdagrad,
    batches: list[tuple[Tensor, Tensor]],
    rates: Iterator[float],
    s: _Settings,
    alternating: bool,
    reduce_v: Callable[[Tensor], None] | None,
) -> Tensor:
    """The AdaGrad steps of one epoch; the summed choice loss (a 0-d tensor, no host sync)."""
    total = torch.zeros((), dtype=opt_u.table.dtype, device=opt_u.table.device)
    for u, items in batches:
        rate = next(rates)
        if s.n_candidates > s.n_negatives:
            c = hardest_negatives(opt_u.table, opt_v.table, u, items[:, 1:], s.n_negatives)
            items = torch.cat([items[:, :1], c], dim=-1)
        if u.shape[0] > 0:
            total += choice_step(opt_u, opt_v, u, items, s.reg, rate, alternating, reduce_v)
        elif reduce_v is not None:
            # A process with fewer interactions still joins the reduction.
            reduce_v(opt_v.grad)
            opt_v.apply(None, rate)
    return total


def _fit_autograd(
    model: LFPL,
    data: ImplicitFeedback,
    generator: torch.Generator,
    val_loss: Callable[[], float] | None,
    s: _Settings,
) -> FitResult:
    n_steps = max(1, -(-len(data) // s.batch_size))

    def batches(epoch: int) -> list[tuple[Tensor, Tensor]]:
        return _epoch_batches(data, s.n_negatives, generator, n_steps)

    def batch_loss(U: Tensor, V: Tensor, batch: tuple[Tensor, Tensor]) -> Tensor:
        users, items = batch
        positives, negatives = items[:, 0], items[:, 1:]
        u = gather_rows(U, users, s.sparse)
        v_pos, v_neg = gather_rows(V, positives, s.sparse), gather_rows(V, negatives, s.sparse)
        scores = torch.cat(
            [(u * v_pos).sum(-1, keepdim=True), torch.bmm(v_neg, u.unsqueeze(-1)).squeeze(-1)],
            dim=-1,
        )
        nll = plackett_luce_nll(scores, top_k=1, validate=False)
        penalty = u.square().sum() + v_pos.square().sum() + v_neg.square().sum()
        return (nll + 0.5 * s.reg * penalty) / users.shape[0]

    return train_epochs(
        model,
        batches,
        batch_loss,
        val_loss,
        method=s.method,
        optimizer="adam",
        epochs=s.epochs,
        lr=s.lr,
        patience=s.patience,
        min_delta=s.min_delta,
        sparse=s.sparse,
        progress=s.progress,
        desc="fit_implicit",
    )
