r"""Fitting LFPL by penalised maximum likelihood with mini-batches.

The objective over :math:`N` training rankings is

.. math::

    L(U, V) = \frac{1}{N} \sum_{n=1}^{N} \ell_n(U, V)
        + \frac{\lambda}{2} \big(\lVert U \rVert_F^2 + \lVert V \rVert_F^2\big),

with :math:`\ell_n` the Plackett-Luce negative log-likelihood of ranking :math:`n`. A mini-batch
:math:`B` estimates it without touching the rows and columns outside the batch: with
:math:`o_i` the number of occurrences of row :math:`i` in all training rankings,

.. math::

    \hat L_B = \frac{1}{|B|} \sum_{n \in B} \Big(\ell_n
        + \frac{\lambda N}{2} \sum_{(i, j) \in n}
            \Big(\frac{\lVert U_i \rVert^2}{o_i} + \frac{\lVert V_j \rVert^2}{o_j}\Big)\Big)

is unbiased for :math:`L` (over rows and columns that occur in training), and equals it when
:math:`B` is everything. So the cost of a step grows with the batch, not with
:math:`|R| \times |C|`; with ``sparse=True`` the gradients are sparse too.

Two optimisers are offered: ``"alternating"`` (Schaefer 2017) takes an AdaGrad step on ``U`` with
``V`` fixed, then one on ``V`` with ``U`` fixed, on every mini-batch; ``"joint"`` takes one Adam
step on both (SparseAdam with ``sparse=True``).
"""

from __future__ import annotations

import copy
import math
import numbers
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from botorch_pref.lfpl.dyads import DyadRankings, check_int
from botorch_pref.lfpl.factor_model import LFPL
from botorch_pref.lfpl.openmp import lfpl_threads
from botorch_pref.lfpl.plackett_luce import plackett_luce_nll

__all__ = ["FitResult", "fit_lfpl", "inverse_occurrence_weights", "lfpl_batch_objective"]

METHODS = ("alternating", "joint")


@dataclass
class FitResult:
    """What a fit did.

    Attributes:
        train_loss: Mean penalised mini-batch objective per epoch.
        val_loss: Mean validation negative log-likelihood per ranking, per epoch (empty
            without a validation set).
        best_epoch: Epoch (0-based) whose parameters the model holds at the end.
        epochs_run: Number of epochs run.
        stopped_early: Whether the validation loss stopped the fit before ``epochs``.
        seconds: Wall-clock seconds of the fit.
        threads: torch's intra-op CPU threads during the fit.
    """

    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    best_epoch: int = -1
    epochs_run: int = 0
    stopped_early: bool = False
    seconds: float = 0.0
    threads: int = 0


def fit_lfpl(
    model: LFPL,
    rankings: DyadRankings,
    *,
    method: str = "alternating",
    epochs: int = 200,
    batch_size: int = 128,
    lr: float | None = None,
    reg: float = 1e-3,
    validation: DyadRankings | float | None = 0.1,
    patience: int = 10,
    min_delta: float = 1e-4,
    sparse: bool = False,
    seed: int = 0,
    progress: bool = False,
    threads: int | str | None = "auto",
) -> FitResult:
    """Fit an :class:`LFPL` model to rankings of dyads.

    Args:
        model: The model to fit, in place.
        rankings: Training rankings (same id spaces as the model).
        method: ``"alternating"`` (AdaGrad on ``U`` then on ``V``) or ``"joint"`` (Adam on both).
        epochs: Maximum number of passes over the training rankings.
        batch_size: Rankings per mini-batch.
        lr: Learning rate (default: 0.1 for ``"alternating"``, 0.01 for ``"joint"``).
        reg: Frobenius penalty weight ``lambda``.
        validation: Rankings for early stopping, or a fraction of ``rankings`` to hold out
            (split by ranking, seeded), or ``None`` to train for ``epochs`` epochs.
        patience: Epochs without a validation improvement above ``min_delta`` before stopping;
            the parameters of the best epoch are restored.
        min_delta: Smallest improvement of the validation loss that counts.
        sparse: Use sparse gradients (for very large ``|R|`` or ``|C|``).
        seed: Seed of the shuffling and of the validation split.
        progress: Show a progress bar (only on a terminal).
        threads: CPU intra-op threads during the fit: ``"auto"`` (see
            :mod:`botorch_pref.lfpl.openmp`), a number, or ``None`` for torch's setting.

    Returns:
        A :class:`FitResult`. The model's ``seen_rows`` and ``seen_cols`` record the ids of the
        rankings it was trained on.
    """
    check_fit_settings(method, epochs, batch_size, lr, reg, patience)
    check_number("min_delta", min_delta, positive=False)
    if not isinstance(rankings, DyadRankings):
        raise TypeError(f"rankings must be DyadRankings, got {type(rankings).__name__}.")
    model._check_sizes(rankings)
    rankings, validation = _split_validation(model, rankings, validation, seed)
    device = model.U.device
    train = rankings.to(device)
    n = len(train)
    row_w = inverse_occurrence_weights(train.rows[train.mask], model.n_rows, n, model.U.dtype)
    col_w = inverse_occurrence_weights(train.cols[train.mask], model.n_cols, n, model.U.dtype)
    generator = torch.Generator(device=device).manual_seed(seed)

    def batches(epoch: int) -> Iterable[tuple[Tensor, ...]]:
        return _ranking_batches(train, batch_size, generator)

    def batch_loss(U: Tensor, V: Tensor, batch: tuple[Tensor, ...]) -> Tensor:
        rows, cols, lengths = batch
        return lfpl_batch_objective(U, V, rows, cols, lengths, reg, row_w, col_w, sparse)

    val_loss = None
    if validation is not None and len(validation) > 0:
        val_loss = partial(_chunked_mean_nll, model, validation.to(device))
    with lfpl_threads(threads, device):
        result = train_epochs(
            model,
            batches,
            batch_loss,
            val_loss,
            method=method,
            optimizer=None,
            epochs=epochs,
            lr=lr,
            patience=patience,
            min_delta=min_delta,
            sparse=sparse,
            progress=progress,
            desc="fit_lfpl",
        )
    model.mark_seen(train)
    return result


def _split_validation(
    model: LFPL, rankings: DyadRankings, validation: object, seed: int
) -> tuple[DyadRankings, DyadRankings | None]:
    """The training and validation rankings of :func:`fit_lfpl` from its ``validation``."""
    if isinstance(validation, (int, float)) and not isinstance(validation, bool):
        if not 0.0 < validation < 1.0:
            raise ValueError(
                f"validation as a fraction must lie in (0, 1), got {validation!r} (pass None "
                "to train without a validation set)."
            )
        rankings, validation = rankings.split(float(validation), seed=seed)
    elif isinstance(validation, DyadRankings):
        model._check_sizes(validation)
    elif validation is not None:
        raise TypeError(
            "validation must be DyadRankings, a fraction in (0, 1) or None, got "
            f"{type(validation).__name__}."
        )
    if len(rankings) == 0:
        raise ValueError("no training rankings.")
    return rankings, validation


def _ranking_batches(
    train: DyadRankings, batch_size: int, generator: torch.Generator
) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
    """One epoch of shuffled ``(rows, cols, lengths)`` batches, padding trimmed per batch."""
    n = len(train)
    order = torch.randperm(n, device=train.device, generator=generator)
    for start in range(0, n, batch_size):
        idx = order[start : start + batch_size]
        lengths = train.lengths[idx]
        # Trim the padding to the longest ranking of the batch (host sync once per batch).
        width = train.max_length if idx.numel() == n else int(lengths.max())
        yield train.rows[idx, :width], train.cols[idx, :width], lengths


def inverse_occurrence_weights(ids: Tensor, size: int, n: int, dtype: torch.dtype) -> Tensor:
    """Per-id penalty weights :math:`N / o_i` (zero for ids that never occur).

    Args:
        ids: Every occurrence of an id in the training rankings (padding removed).
        size: Number of ids.
        n: Number of training rankings ``N``.
        dtype: Floating dtype of the result.

    Returns:
        ``(size,)`` weights.
    """
    counts = torch.bincount(ids, minlength=size).to(dtype)
    return torch.where(counts > 0, n / counts.clamp_min(1), torch.zeros_like(counts))


def lfpl_batch_objective(
    U: Tensor,
    V: Tensor,
    rows: Tensor,
    cols: Tensor,
    lengths: Tensor,
    reg: float,
    row_weights: Tensor,
    col_weights: Tensor,
    sparse: bool = False,
) -> Tensor:
    r"""The mini-batch estimate :math:`\hat L_B` of the penalised objective (module docstring).

    Args:
        U: ``(n_rows, K)`` row factors.
        V: ``(n_cols, K)`` column factors.
        rows: ``(B, M)`` row ids of the batch's rankings (preference order, padded).
        cols: ``(B, M)`` column ids.
        lengths: ``(B,)`` lengths.
        reg: Frobenius penalty weight ``lambda``.
        row_weights: ``(n_rows,)`` weights :math:`N / o_i` from :func:`inverse_occurrence_weights`.
        col_weights: ``(n_cols,)`` weights :math:`N / o_j`.
        sparse: Gather with sparse gradients.

    Returns:
        The scalar objective.
    """
    u, v = gather_rows(U, rows, sparse), gather_rows(V, cols, sparse)
    nll = plackett_luce_nll((u * v).sum(dim=-1), lengths, validate=False)
    mask = torch.arange(rows.shape[1], device=rows.device) < lengths.unsqueeze(-1)
    norms = u.square().sum(-1) * row_weights[rows] + v.square().sum(-1) * col_weights[cols]
    penalty = torch.where(mask, norms, torch.zeros_like(norms)).sum()
    return (nll + 0.5 * reg * penalty) / rows.shape[0]


# ---------------------------------------------------------------------------- shared machinery
def check_number(name: str, value: object, positive: bool) -> None:
    """Raise unless ``value`` is a finite real number, positive or non-negative."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r}.")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        kind = "positive" if positive else "non-negative"
        raise ValueError(f"{name} must be {kind} and finite, got {value!r}.")


def check_fit_settings(
    method: str, epochs: int, batch_size: int, lr: float | None, reg: float, patience: int
) -> None:
    """Raise, naming the setting, unless the settings every LFPL fit takes are valid."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}.")
    check_int("epochs", epochs, 1)
    check_int("batch_size", batch_size, 1)
    if lr is not None:
        check_number("lr", lr, positive=True)
    check_number("reg", reg, positive=False)
    check_int("patience", patience, 1)


def gather_rows(table: Tensor, ids: Tensor, sparse: bool) -> Tensor:
    """``table[ids]`` whose backward is a fast scatter-add (a sparse gradient if ``sparse``).

    ``F.embedding``'s backward scatters, unlike indexing's.
    """
    return F.embedding(ids, table, sparse=sparse)


@torch.no_grad()
def _chunked_mean_nll(model: LFPL, rankings: DyadRankings, chunk: int = 65536) -> float:
    total = 0.0
    for start in range(0, len(rankings), chunk):
        part = rankings[start : start + chunk]
        total += float(model.nll(part, reduction="sum"))
    return total / len(rankings)


def _make_optimizers(
    model: LFPL, method: str, optimizer: str | None, lr: float | None, sparse: bool
) -> list[tuple[torch.optim.Optimizer, str]]:
    """Optimisers and which factor each one moves (``"U"``, ``"V"`` or ``"UV"``)."""
    name = optimizer or ("adagrad" if method == "alternating" else "adam")
    if name not in ("adagrad", "adam"):
        raise ValueError(f"optimizer must be 'adagrad' or 'adam', got {name!r}.")
    if lr is None:
        lr = 0.1 if name == "adagrad" else 0.01

    def make(params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
        if name == "adagrad":
            return torch.optim.Adagrad(params, lr=lr)
        if sparse:
            return torch.optim.SparseAdam(params, lr=lr)
        return torch.optim.Adam(params, lr=lr)

    if method == "alternating":
        return [(make([model.U]), "U"), (make([model.V]), "V")]
    return [(make([model.U, model.V]), "UV")]


class EpochLoop:
    """The epochs of a fit around its steps: progress bar, loss check, early stopping, result.

    Iterating yields the epoch numbers; after each epoch the fit calls :meth:`end_epoch` with
    its training loss and stops when it returns ``True``; :meth:`finish` restores the
    parameters of the best validation epoch and returns the :class:`FitResult`.
    """

    def __init__(
        self,
        model: LFPL,
        epochs: int,
        val_loss: Callable[[], float] | None,
        patience: int,
        min_delta: float,
        desc: str,
        show: bool,
    ) -> None:
        from tqdm.auto import tqdm

        self.model, self.val_loss = model, val_loss
        self.epochs, self.patience, self.min_delta = epochs, patience, min_delta
        self.result = FitResult()
        self.best, self.waited = math.inf, 0
        self.best_state: dict[str, Tensor] | None = None
        self.start = time.perf_counter()
        self.bar = tqdm(range(epochs), desc=desc, disable=not show)

    def __iter__(self) -> Iterator[int]:
        return iter(self.bar)

    def end_epoch(self, epoch: int, epoch_loss: float) -> bool:
        """Record the epoch's training loss and validate; whether to stop (early)."""
        if not math.isfinite(epoch_loss):
            raise ValueError(
                f"the training loss became {epoch_loss} at epoch {epoch}: lower lr or raise reg."
            )
        result = self.result
        result.train_loss.append(epoch_loss)
        result.epochs_run = epoch + 1
        postfix = {"loss": f"{epoch_loss:.4f}"}
        stop = False
        if self.val_loss is not None:
            self.model.eval()
            current = self.val_loss()
            self.model.train()
            result.val_loss.append(current)
            postfix["val"] = f"{current:.4f}"
            if current < self.best - self.min_delta:
                self.best, self.waited, result.best_epoch = current, 0, epoch
                self.best_state = copy.deepcopy(self.model.state_dict())
            else:
                self.waited += 1
                stop = self.waited >= self.patience
                result.stopped_early = stop and epoch + 1 < self.epochs
        self.bar.set_postfix(postfix)
        return stop

    def finish(self) -> FitResult:
        """Close the bar, restore the best state (with validation) and return the result."""
        self.bar.close()
        result = self.result
        if self.best_state is not None:
            self.model.load_state_dict(self.best_state)
        elif self.val_loss is None:
            result.best_epoch = result.epochs_run - 1
        self.model.eval()
        result.seconds = time.perf_counter() - self.start
        result.threads = torch.get_num_threads()
        return result


def train_epochs(
    model: LFPL,
    batches: Callable[[int], Iterable[Any]],
    batch_loss: Callable[[Tensor, Tensor, Any], Tensor],
    val_loss: Callable[[], float] | None,
    *,
    method: str,
    optimizer: str | None,
    epochs: int,
    lr: float | None,
    patience: int,
    min_delta: float,
    sparse: bool,
    progress: bool,
    desc: str,
) -> FitResult:
    """The autograd epoch loop shared by the ranking and the implicit-feedback fits."""
    optimizers = _make_optimizers(model, method, optimizer, lr, sparse)
    show = progress and sys.stderr.isatty()
    loop = EpochLoop(model, epochs, val_loss, patience, min_delta, desc, show)
    model.train()
    for epoch in loop:
        total = torch.zeros((), dtype=model.U.dtype, device=model.U.device)
        n_batches = 0
        for batch in batches(epoch):
            for opt, which in optimizers:
                opt.zero_grad(set_to_none=True)
                U = model.U if "U" in which else model.U.detach()
                V = model.V if "V" in which else model.V.detach()
                loss = batch_loss(U, V, batch)
                loss.backward()
                with torch.sparse.check_sparse_tensor_invariants(enable=False):
                    # An explicit opt-out: torch's sparse AdaGrad warns otherwise.
                    opt.step()
            total += loss.detach()
            n_batches += 1
        if loop.end_epoch(epoch, float(total) / max(n_batches, 1)):
            break
    return loop.finish()
