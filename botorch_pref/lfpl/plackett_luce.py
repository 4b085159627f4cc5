r"""The Plackett-Luce likelihood of rankings, vectorised over rankings of different lengths.

A ranking :math:`z_{(1)} \succ \dots \succ z_{(M)}` of :math:`M` alternatives with log-skills
(scores) :math:`s_1, \dots, s_M`, listed in preference order, has Plackett-Luce probability

.. math::

    P(z_{(1)} \succ \dots \succ z_{(M)})
        = \prod_{k=1}^{M-1} \frac{\exp(s_k)}{\sum_{l=k}^{M} \exp(s_l)},

so its negative log-likelihood is :math:`\sum_{k<M} \big(\mathrm{LSE}_{l \ge k}(s_l) - s_k\big)`.
The inner log-sum-exps of all stages are one *reverse* ``logcumsumexp``: flip the scores, take the
cumulative log-sum-exp, flip back. A batch of rankings of different lengths is stored padded to a
common width ``M`` with a length per ranking; padded entries never enter a result or a gradient.

A *top-k* (partial) ranking only says which alternatives came first, second, ..., k-th among all
``M``: only its first ``k`` stages count.
"""

from __future__ import annotations

import torch
from torch import Tensor

from botorch_pref.lfpl.dyads import holds_integers
from botorch_pref.likelihoods import plackett_luce_stages

__all__ = ["gumbel_rankings", "plackett_luce_nll"]


def plackett_luce_nll(
    scores: Tensor,
    lengths: Tensor | None = None,
    weights: Tensor | None = None,
    top_k: int | Tensor | None = None,
    reduction: str = "sum",
    validate: bool = True,
) -> Tensor:
    r"""Negative log-likelihood of a batch of (padded) rankings under Plackett-Luce.

    For ranking ``b`` with length :math:`n_b`, weight :math:`w_b` and :math:`k_b` counted stages,

    .. math::

        \ell_b = \sum_{k=1}^{\min(k_b, n_b - 1)}
            \Big(\log \sum_{l=k}^{n_b} e^{s_{b,l}} - s_{b,k}\Big),
        \qquad \mathrm{NLL} = \sum_b w_b \ell_b .

    Computed with a reverse ``logcumsumexp``, so scores of any magnitude are handled without
    overflow; padded entries (positions ``>= lengths[b]``, whatever their value, NaN included)
    get a zero gradient.

    Args:
        scores: ``(*batch, M)`` scores (log-skills) of the alternatives of each ranking, listed
            in preference order (most preferred first).
        lengths: ``(*batch)`` integer lengths; entries at positions ``>= lengths`` are padding.
            ``None`` means every ranking has length ``M``.
        weights: Optional ``(*batch)`` non-negative weights of the rankings.
        top_k: Optional number of counted stages (an int, or ``(*batch)`` integers): a top-k
            ranking only orders its first ``k`` alternatives ahead of all the others.
            ``None`` counts every stage (a full ranking).
        reduction: ``"sum"`` (weighted sum over rankings), ``"mean"`` (the weighted sum divided
            by the sum of the weights, or by the number of rankings without weights) or
            ``"none"`` (the weighted ``(*batch)`` per-ranking values).
        validate: Check that lengths are integers in ``[0, M]``, that the scores of the
            real (non-padded) entries and the weights are finite, that weights are non-negative,
            and that a ``"mean"`` has something to divide by (this synchronises with the
            device; training loops on validated data pass ``False``).

    Returns:
        The negative log-likelihood: a scalar, or ``(*batch)`` with ``reduction="none"``.

    Raises:
        TypeError: If ``scores`` is not a floating tensor.
        ValueError: If a shape does not match the batch shape of ``scores``, if
            ``reduction`` is unknown, or (with ``validate``) if a value is out of range.
    """
    _check_floating(scores)
    if scores.dim() < 1:
        raise ValueError("scores must have at least one dimension (the ranking positions).")
    if reduction not in ("sum", "mean", "none"):
        raise ValueError(f"reduction must be 'sum', 'mean' or 'none', got {reduction!r}.")
    width = scores.shape[-1]
    scores, n_stages = _mask_padding(scores, lengths, validate)
    if top_k is not None:
        counted = _counted_stages(top_k, scores.device, validate)
        _check_batch_shape(counted, n_stages.shape)
        n_stages = torch.minimum(n_stages, counted)
    if lengths is None and top_k is None and width == 2:
        # Pairs (the implicit-feedback case): -log sigmoid(s_1 - s_2), the same value, faster.
        nll = torch.nn.functional.softplus(scores[..., 1] - scores[..., 0])
        return _reduce(nll, weights, reduction, validate)
    # The stage computation is shared with the GP's Ranking likelihood.
    stage_log_prob, _ = plackett_luce_stages(scores, n_stages)
    return _reduce(-stage_log_prob.sum(dim=-1), weights, reduction, validate)


def _mask_padding(scores: Tensor, lengths: Tensor | None, validate: bool) -> tuple[Tensor, Tensor]:
    """The scores with their padding filled, and the number of stages of each ranking."""
    width = scores.shape[-1]
    if lengths is None:
        if validate:
            _check_finite(scores, None, "scores")
        return scores, torch.full(scores.shape[:-1], width - 1, device=scores.device)
    lengths = torch.as_tensor(lengths, device=scores.device)
    if lengths.shape != scores.shape[:-1]:
        raise ValueError(
            f"lengths must have shape {tuple(scores.shape[:-1])} (the batch shape of "
            f"scores), got {tuple(lengths.shape)}."
        )
    if validate:
        _check_lengths(lengths, width)
    valid = torch.arange(width, device=scores.device) < lengths.unsqueeze(-1)
    if validate:
        _check_finite(scores, valid, "scores")
    # A very negative finite fill: exp(fill - s) == 0 exactly, and unlike -inf it keeps
    # the backward pass of logcumsumexp free of NaN.
    fill = torch.full_like(scores, torch.finfo(scores.dtype).min)
    return torch.where(valid, scores, fill), lengths - 1


def _counted_stages(top_k: int | Tensor, device: torch.device, validate: bool) -> Tensor:
    """``top_k`` as a tensor of non-negative integers."""
    top_k = torch.as_tensor(top_k, device=device)
    if validate:
        if not holds_integers(top_k):
            raise ValueError(f"top_k must be integers, got dtype {top_k.dtype}.")
        if top_k.numel() > 0 and bool((top_k < 0).any()):
            raise ValueError(f"top_k must be non-negative, got {top_k.min().item()}.")
    return top_k


def _check_batch_shape(top_k: Tensor, batch: torch.Size) -> None:
    """Raise unless ``top_k`` broadcasts to the batch shape without enlarging it.

    A ``(B, 1)`` ``top_k`` would otherwise broadcast a ``(B,)`` batch into a ``B x B`` grid.
    """
    try:
        fits = torch.broadcast_shapes(top_k.shape, batch) == batch
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"top_k must be an integer or have shape {tuple(batch)} (the batch shape of "
            f"scores), got shape {tuple(top_k.shape)}."
        )


def _reduce(nll: Tensor, weights: Tensor | None, reduction: str, validate: bool) -> Tensor:
    """Weight the per-ranking values and reduce them."""
    if weights is not None:
        weights = torch.as_tensor(weights, dtype=nll.dtype, device=nll.device)
        if weights.shape != nll.shape:
            raise ValueError(
                f"weights must have shape {tuple(nll.shape)}, got {tuple(weights.shape)}."
            )
        if validate and weights.numel() > 0:
            _check_finite(weights, None, "weights")
            if bool((weights < 0).any()):
                raise ValueError(f"weights must be non-negative, got {weights.min().item()}.")
        nll = nll * weights
    if reduction == "none":
        return nll
    total = nll.sum()
    if reduction == "sum":
        return total
    denominator = weights.sum() if weights is not None else nll.new_tensor(float(nll.numel()))
    if validate and not bool(denominator > 0):
        what = "the weights sum to zero" if weights is not None else "there are no rankings"
        raise ValueError(f'reduction="mean" is undefined: {what}.')
    return total / denominator


def _check_lengths(lengths: Tensor, width: int) -> None:
    if not holds_integers(lengths):
        bad = lengths.flatten()[0].item() if lengths.numel() > 0 else None
        raise ValueError(f"lengths must be integers, got dtype {lengths.dtype} (e.g. {bad}).")
    if lengths.numel() > 0:
        out = (lengths < 0) | (lengths > width)
        if bool(out.any()):
            raise ValueError(
                f"lengths must lie in [0, {width}] (the width of scores), got "
                f"{lengths[out][0].item()}."
            )


def _check_floating(scores: object) -> None:
    """Raise a ``TypeError`` unless ``scores`` is a floating tensor."""
    if not isinstance(scores, Tensor) or not scores.is_floating_point():
        got = scores.dtype if isinstance(scores, Tensor) else type(scores).__name__
        raise TypeError(f"scores must be a floating tensor, got {got}.")


def _check_finite(values: Tensor, mask: Tensor | None, name: str) -> None:
    bad = ~torch.isfinite(values)
    if mask is not None:
        bad &= mask
    if bool(bad.any()):
        index = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError(f"{name}{list(index)} is {values[index].item()}: must be finite.")


def gumbel_rankings(scores: Tensor, generator: torch.Generator | None = None) -> Tensor:
    r"""Sample Plackett-Luce rankings with the Gumbel trick.

    With i.i.d. standard Gumbel noise :math:`g_l`, sorting :math:`s_l + g_l` in decreasing
    order yields a ranking distributed as Plackett-Luce with log-skills :math:`s`. The noise is
    drawn as :math:`g = -\log E` with :math:`E \sim \mathrm{Exp}(1)`.

    Args:
        scores: ``(*batch, M)`` log-skills.
        generator: Optional random generator (on the device of ``scores``).

    Returns:
        ``(*batch, M)`` long tensor of positions into the last dimension of ``scores``, in
        preference order (the sampled winner first).

    Raises:
        TypeError: If ``scores`` is not a floating tensor.
    """
    _check_floating(scores)
    exponential = torch.empty_like(scores).exponential_(generator=generator)
    gumbel = -torch.log(exponential.clamp_min(torch.finfo(scores.dtype).tiny))
    return torch.argsort(scores + gumbel, dim=-1, descending=True)
