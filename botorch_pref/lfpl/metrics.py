r"""Ranking metrics as small pure functions on score tensors.

* Kendall's tau of predicted scores against an observed ranking,
* per-user AUC, hit rate and NDCG of one held-out item against a list of candidate items.
"""

from __future__ import annotations

import torch
from torch import Tensor

from botorch_pref.lfpl.dyads import holds_integers

__all__ = ["heldout_item_metrics", "kendall_tau"]


def kendall_tau(scores: Tensor, lengths: Tensor | None = None) -> Tensor:
    r"""Kendall's tau between predicted scores and observed rankings.

    ``scores[b, m]`` is the predicted score of the alternative the observed ranking ``b`` put at
    position ``m`` (best first). Over the :math:`n_b (n_b - 1) / 2` pairs :math:`m < m'`, a pair
    is concordant when :math:`s_m > s_{m'}` and discordant when :math:`s_m < s_{m'}`:

    .. math::

        \tau_b = \frac{\#\text{concordant} - \#\text{discordant}}{n_b (n_b - 1) / 2}

    (tau-a: a tie in the predicted scores counts as neither).

    Args:
        scores: ``(*batch, M)`` predicted scores in observed preference order.
        lengths: ``(*batch)`` lengths (``>= 2``); positions past them are ignored.

    Returns:
        ``(*batch)`` Kendall taus in ``[-1, 1]``.
    """
    width = scores.shape[-1]
    positions = torch.arange(width, device=scores.device)
    if lengths is None:
        lengths = torch.full(scores.shape[:-1], width, device=scores.device)
    lengths = torch.as_tensor(lengths, device=scores.device)
    if not holds_integers(lengths):
        raise TypeError(f"lengths must be integers, got dtype {lengths.dtype}.")
    if bool((lengths > width).any()):
        raise ValueError(
            f"lengths must not exceed the width {width} of scores, got {int(lengths.max())}."
        )
    if bool((lengths < 2).any()):
        raise ValueError(
            f"kendall_tau needs rankings of length at least 2, got {int(lengths.min())}."
        )
    valid = positions < lengths.unsqueeze(-1)
    upper = positions.unsqueeze(-1) < positions  # m < m'
    pair_valid = valid.unsqueeze(-1) & valid.unsqueeze(-2) & upper
    sign = torch.sign(scores.unsqueeze(-1) - scores.unsqueeze(-2))
    net = torch.where(pair_valid, sign, torch.zeros_like(sign)).sum(dim=(-1, -2))
    n_pairs = (lengths * (lengths - 1) / 2).to(scores.dtype)
    return net / n_pairs


def heldout_item_metrics(
    scores: Tensor, target: Tensor, exclude: Tensor, k: int = 10
) -> dict[str, Tensor]:
    r"""Per-user AUC, HR@k and NDCG@k of one held-out item, ties broken uniformly at random.

    For user :math:`u` with held-out item :math:`t`, the negatives are the items neither in
    ``exclude`` (the user's training positives) nor :math:`t`. With :math:`g` negatives scoring
    above :math:`t`, :math:`e` tied with it and :math:`n` negatives in all,

    .. math::

        \mathrm{AUC} = \frac{n - g - e/2}{n}, \qquad
        \mathrm{HR@k} = \mathbb{E}[\mathbf 1\{r < k\}], \qquad
        \mathrm{NDCG@k} = \mathbb{E}\Big[\frac{\mathbf 1\{r < k\}}{\log_2(r + 2)}\Big],

    where the 0-based rank :math:`r` of :math:`t` among all non-excluded items is uniform on
    :math:`\{g, \dots, g + e\}` (a random order of the ties). The expectations are exact.

    Args:
        scores: ``(B, n_items)`` scores of every item for each user.
        target: ``(B,)`` held-out item of each user.
        exclude: ``(B, n_items)`` boolean mask of the items to leave out (training positives);
            the target must not be excluded.
        k: Cut-off of the hit rate and NDCG.

    Returns:
        A dict of ``(B,)`` tensors: ``"auc"``, ``"hr"`` and ``"ndcg"``.
    """
    if scores.dim() != 2 or exclude.shape != scores.shape or target.shape != scores.shape[:1]:
        raise ValueError(
            "scores and exclude must be (B, n_items) and target (B,), got "
            f"{tuple(scores.shape)}, {tuple(exclude.shape)} and {tuple(target.shape)}."
        )
    if exclude.dtype != torch.bool:
        raise TypeError(
            f"exclude must be a boolean mask, got dtype {exclude.dtype} (use `exclude.bool()` "
            "for a 0/1 mask)."
        )
    if k < 1:
        raise ValueError(f"k must be positive, got {k}.")
    if bool(torch.isnan(scores).any()):
        raise ValueError("scores contain NaN.")
    target = target.long().unsqueeze(-1)
    if bool(exclude.gather(-1, target).any()):
        raise ValueError("a held-out item is also among the excluded (training) items.")
    others = ~exclude
    others.scatter_(-1, target, False)
    s_t = scores.gather(-1, target)
    greater = ((scores > s_t) & others).sum(-1)
    ties = ((scores == s_t) & others).sum(-1)
    n_neg = others.sum(-1)
    if bool((n_neg == 0).any()):
        raise ValueError("a user has no unobserved item to compare the held-out item with.")
    dtype = scores.dtype if scores.is_floating_point() else torch.get_default_dtype()
    g, e = greater.to(dtype), ties.to(dtype)
    auc = (n_neg.to(dtype) - g - 0.5 * e) / n_neg.to(dtype)
    hr = torch.minimum((k - g).clamp_min(0.0), e + 1) / (e + 1)
    ranks = torch.arange(k, device=scores.device, dtype=dtype)
    in_range = (ranks >= g.unsqueeze(-1)) & (ranks <= (g + e).unsqueeze(-1))
    gains = in_range.to(dtype) / torch.log2(ranks + 2)
    ndcg = gains.sum(-1) / (e + 1)
    return {"auc": auc, "hr": hr, "ndcg": ndcg}
