r"""Synthetic rankings from a known LFPL, and a cross-validation check of parameter recovery.

The true factors are drawn i.i.d. :math:`U_{ik}, V_{jk} \sim N(0, \sigma^2)`. Each ranking
takes ``length`` distinct dyads uniformly at random from :math:`R \times C` and orders them with
the Gumbel trick: sorting :math:`U_i^\top V_j + g_{ij}` with i.i.d. standard Gumbel :math:`g`
draws a Plackett-Luce ranking. Cross-validation then compares Kendall's tau of the fitted model's
scores against the held-out rankings with the tau of the true scores on the same rankings: the
true model's tau is the ceiling set by the Plackett-Luce noise.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from botorch_pref.lfpl.dyads import DyadRankings, check_int
from botorch_pref.lfpl.factor_model import LFPL
from botorch_pref.lfpl.metrics import kendall_tau
from botorch_pref.lfpl.plackett_luce import gumbel_rankings
from botorch_pref.lfpl.training import check_number, fit_lfpl

__all__ = [
    "CVResult",
    "cross_validate_lfpl",
    "heldout_tau",
    "power_law_interactions",
    "sample_lfpl",
]

_TRUTH_STREAM = 0x5EED_0F_7A0E


def sample_lfpl(
    n_rankings: int,
    length: int,
    n_rows: int,
    n_cols: int,
    dim: int,
    seed: int = 0,
    scale: float = 1.0,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> tuple[DyadRankings, LFPL]:
    """Draw rankings of dyads from a random LFPL.

    Args:
        n_rankings: Number of rankings ``N``.
        length: Dyads per ranking (at least 2, at most ``n_rows * n_cols``).
        n_rows: Number of row entities.
        n_cols: Number of column entities.
        dim: Latent dimension ``K`` of the true model.
        seed: Seed of everything drawn.
        scale: Standard deviation ``sigma`` of the true factors.
        device: Device of the result.
        dtype: Dtype of the true factors (default: torch's default).

    Returns:
        ``(rankings, truth)``: the rankings and the true model (all ids marked as seen).

    Raises:
        TypeError: If a count or ``dim`` is not an integer, or ``scale`` is not a number.
        ValueError: If a count, ``length``, ``dim`` or ``scale`` is out of range.
    """
    for name, value in (
        ("n_rankings", n_rankings),
        ("length", length),
        ("n_rows", n_rows),
        ("n_cols", n_cols),
        ("dim", dim),
    ):
        check_int(name, value, minimum=None)  # the ranges below, with their own messages
    if n_rankings < 1 or n_rows < 1 or n_cols < 1:
        raise ValueError(
            "n_rankings, n_rows and n_cols must be positive, got "
            f"{n_rankings}, {n_rows} and {n_cols}."
        )
    n_dyads = n_rows * n_cols
    if not 2 <= length <= n_dyads:
        raise ValueError(f"length must lie in [2, {n_dyads}] (n_rows * n_cols), got {length}.")
    if dim < 1:
        raise ValueError(f"dim must be positive, got {dim}.")
    check_number("scale", scale, positive=True)
    # An offset stream: LFPL(..., seed=seed) must not start from the truth's own draw.
    generator = torch.Generator().manual_seed(seed + _TRUTH_STREAM)
    U = torch.randn(n_rows, dim, generator=generator, dtype=dtype) * scale
    V = torch.randn(n_cols, dim, generator=generator, dtype=dtype) * scale
    dyads = _distinct_dyads(n_rankings, length, n_dyads, generator)
    rows, cols = dyads // n_cols, dyads % n_cols
    scores = (U[rows] * V[cols]).sum(-1)
    order = gumbel_rankings(scores, generator)
    rows, cols = rows.gather(-1, order), cols.gather(-1, order)
    rankings = DyadRankings(rows, cols, n_rows=n_rows, n_cols=n_cols).to(device or "cpu")
    truth = LFPL.from_factors(U.to(device or "cpu"), V.to(device or "cpu"))
    return rankings, truth


def _distinct_dyads(n: int, length: int, n_dyads: int, generator: torch.Generator) -> Tensor:
    """``(n, length)`` dyad indices, distinct within each row, uniform without replacement."""
    if 2 * length > n_dyads:
        return torch.rand(n, n_dyads, generator=generator).argsort(dim=-1)[:, :length]
    dyads = torch.randint(n_dyads, (n, length), generator=generator)
    while True:
        ordered = dyads.sort(dim=-1).values
        bad = (ordered[:, 1:] == ordered[:, :-1]).any(dim=-1).nonzero().squeeze(-1)
        if bad.numel() == 0:
            return dyads
        dyads[bad] = torch.randint(n_dyads, (bad.numel(), length), generator=generator)


@torch.no_grad()
def heldout_tau(model: LFPL, rankings: DyadRankings) -> Tensor:
    """Kendall's tau of the model's scores against each observed ranking.

    Args:
        model: A fitted model; every id of ``rankings`` must have been seen.
        rankings: The observed rankings.

    Returns:
        ``(N,)`` taus.
    """
    rankings = rankings.to(model.U.device)
    scores = model.score(rankings.rows, rankings.cols)
    return kendall_tau(scores, rankings.lengths)


@dataclass
class CVResult:
    """Per-fold Kendall taus of a fitted LFPL and of the true model on the held-out rankings.

    Attributes:
        tau: Mean tau of the fitted model, per fold.
        true_tau: Mean tau of the true model on the same rankings, per fold.
        seconds: Fitting seconds per fold.
        skipped: Held-out rankings left out per fold because an id was never seen in training.
    """

    tau: list[float] = field(default_factory=list)
    true_tau: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)

    @property
    def mean_tau(self) -> float:
        """Mean of the fitted model's fold taus."""
        return sum(self.tau) / len(self.tau)

    @property
    def mean_true_tau(self) -> float:
        """Mean of the true model's fold taus."""
        return sum(self.true_tau) / len(self.true_tau)

    @property
    def ratio(self) -> float:
        """``mean_tau / mean_true_tau``."""
        return self.mean_tau / self.mean_true_tau


def cross_validate_lfpl(
    rankings: DyadRankings,
    truth: LFPL | None,
    dim: int,
    n_folds: int = 10,
    seed: int = 0,
    init_scale: float = 0.1,
    **fit_kwargs: Any,
) -> CVResult:
    """K-fold cross-validation of LFPL by ranking, reporting held-out Kendall tau.

    Args:
        rankings: All rankings.
        truth: The true model (for the reference tau), or ``None`` for real data.
        dim: Latent dimension of the fitted models.
        n_folds: Number of folds.
        seed: Seed of the folds, the initial factors and the fits.
        init_scale: Standard deviation of the initial factors.
        **fit_kwargs: Passed to :func:`fit_lfpl` (``method``, ``epochs``, ``lr``, ``reg``, ...).

    Returns:
        A :class:`CVResult` (``true_tau`` is NaN per fold without ``truth``).
    """
    result = CVResult()
    device = truth.U.device if truth is not None else rankings.device
    dtype = truth.U.dtype if truth is not None else None
    for fold, (train, test) in enumerate(rankings.kfold(n_folds, seed=seed)):
        model = LFPL(
            rankings.n_rows,
            rankings.n_cols,
            dim,
            init_scale=init_scale,
            seed=seed + fold,
            device=device,
            dtype=dtype,
        )
        start = time.perf_counter()
        fit_lfpl(model, train, seed=seed + fold, **fit_kwargs)
        result.seconds.append(time.perf_counter() - start)
        test = test.to(device)
        known = model.seen_rows[test.rows] & model.seen_cols[test.cols] | ~test.mask
        usable = known.all(dim=-1)
        result.skipped.append(int((~usable).sum()))
        if not bool(usable.any()):
            raise ValueError(f"fold {fold}: no held-out ranking has only ids seen in training.")
        test = test[usable.nonzero().squeeze(-1)]
        result.tau.append(float(heldout_tau(model, test).mean()))
        true_tau = float(heldout_tau(truth, test).mean()) if truth is not None else float("nan")
        result.true_tau.append(true_tau)
    return result


def power_law_interactions(
    n_users: int,
    n_items: int,
    n_interactions: int,
    dim: int = 8,
    user_exponent: float = 0.8,
    item_exponent: float = 0.8,
    scale: float = 1.0,
    seed: int = 0,
    device: torch.device | str | None = None,
    chunk: int = 1024,
) -> tuple[ImplicitFeedback, LFPL]:  # noqa: F821 (imported below: no cycle)
    r"""Implicit feedback with power-law user activity and item popularity, from a known LFPL.

    User :math:`u` gets a number of interactions :math:`c_u` drawn as the counts of
    ``n_interactions`` draws with probabilities :math:`\propto r_u^{-a}` (:math:`r_u` a random
    rank, :math:`a` = ``user_exponent``), clipped to ``[1, n_items - 1]``. Its items are the
    :math:`c_u` first of a Plackett-Luce ranking of all items with log-skills

    .. math::

        U_u^\top V_j - b \log r_j ,

    (Gumbel trick, :math:`b` = ``item_exponent``, :math:`r_j` a random item rank), so popular
    items are chosen more often and the latent factors :math:`U, V \sim N(0, \sigma^2 / K)`
    decide the rest; the returned LFPL holds these factors (without the popularity term).

    Args:
        n_users: Number of users.
        n_items: Number of items (at least 2).
        n_interactions: Target number of interactions (the result has about as many).
        dim: Latent dimension ``K`` of the truth.
        user_exponent: Power-law exponent ``a`` of user activity.
        item_exponent: Power-law exponent ``b`` of item popularity.
        scale: ``sigma``: the standard deviation of the true log-skills' latent part.
        seed: Seed of everything drawn.
        device: Device of the result (the draw runs there too).
        chunk: Users drawn at once (memory grows as ``chunk * n_items``).

    Returns:
        ``(interactions, truth)``.
    """
    from botorch_pref.lfpl.implicit import ImplicitFeedback

    check_int("n_users", n_users, 1)
    check_int("n_items", n_items, 2)
    check_int("n_interactions", n_interactions, 1)
    check_int("dim", dim, 1)
    check_int("chunk", chunk, 1)
    check_number("user_exponent", user_exponent, positive=False)
    check_number("item_exponent", item_exponent, positive=False)
    check_number("scale", scale, positive=True)
    device = torch.device(device or "cpu")
    generator = torch.Generator().manual_seed(seed + _TRUTH_STREAM)
    U = torch.randn(n_users, dim, generator=generator) * (scale / dim**0.5)
    V = torch.randn(n_items, dim, generator=generator) * (scale / dim**0.5)
    user_rank = torch.randperm(n_users, generator=generator).double() + 1
    item_rank = torch.randperm(n_items, generator=generator).double() + 1
    activity = user_rank.pow(-float(user_exponent))
    draws = torch.multinomial(activity, n_interactions, replacement=True, generator=generator)
    counts = torch.bincount(draws, minlength=n_users).clamp(1, n_items - 1)
    log_pop = (-float(item_exponent) * item_rank.log()).float().to(device)
    U, V, counts = U.to(device), V.to(device), counts.to(device)
    gen_dev = torch.Generator(device=device).manual_seed(seed)
    users, items = [], []
    for start in range(0, n_users, chunk):
        c = counts[start : start + chunk]
        logits = U[start : start + chunk] @ V.T + log_pop
        noise = torch.empty_like(logits).exponential_(generator=gen_dev)
        keys = logits - torch.log(noise.clamp_min(torch.finfo(noise.dtype).tiny))
        top = keys.topk(int(c.max()), dim=-1).indices
        keep = torch.arange(top.shape[1], device=device) < c.unsqueeze(-1)
        rows = torch.arange(start, start + c.shape[0], device=device).unsqueeze(-1)
        users.append(rows.expand_as(top)[keep])
        items.append(top[keep])
    pairs = torch.stack([torch.cat(users), torch.cat(items)], dim=-1)
    return ImplicitFeedback(pairs, n_users, n_items), LFPL.from_factors(U, V)
