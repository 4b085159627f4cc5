r"""Plackett-Luce likelihoods: a choice among ``q`` options and full or top-k rankings.

A ranking :math:`o_0 \succ o_1 \succ \dots` with ``k`` counted stages has probability

.. math::

    P = \prod_{t < k} \frac{e^{f(o_t)/s}}{\sum_{l \ge t} e^{f(o_l)/s}},

a product of multinomial-logit choices among the options not yet placed (Gumbel noise of scale
``s`` on each utility, then sorting). A choice is the one-stage case, and a choice between two
options is :class:`~botorch_pref.likelihoods.links.PairwiseLogit` exactly.
:func:`plackett_luce_stages` computes the stage log-probabilities with one reverse
``logcumsumexp``; the LFPL module (:mod:`botorch_pref.lfpl.plackett_luce`) uses the same code.
"""

from __future__ import annotations

import torch
from torch import Tensor

from botorch_pref.likelihoods.base import ObservationKind
from botorch_pref.likelihoods.links import PairwiseLogit

__all__ = ["Choice", "Ranking", "plackett_luce_stages"]


def plackett_luce_stages(
    scores: Tensor, n_stages: Tensor, valid: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    r"""Per-stage Plackett-Luce log-probabilities of rankings listed best first.

    For scores :math:`s_1, \dots, s_M` in preference order, stage :math:`t` (the choice of the
    :math:`t`-th option among those not yet placed) has log-probability

    .. math::

        \ell_t = s_t - \log \sum_{l \ge t} e^{s_l}, \qquad t < k,

    and zero for :math:`t \ge k` (``n_stages``). The tail log-sum-exps are one reverse
    ``logcumsumexp``. This is the core both the LFPL module
    (:func:`botorch_pref.lfpl.plackett_luce.plackett_luce_nll`) and the GP likelihoods
    (:class:`Ranking`, :class:`Choice`) use.

    Args:
        scores: ``(*batch, M)`` scores, best first.
        n_stages: ``(*batch)`` integer numbers of counted stages (at most ``M - 1`` are
            meaningful; the last place is not a choice).
        valid: Optional ``(*batch, M)`` bool mask; invalid (padding) entries are replaced by a
            very negative finite number before the log-sum-exps (their value, NaN included,
            never reaches a result or a gradient).

    Returns:
        ``(stage_log_prob, tail_lse)``, both ``(*batch, M)``: the stage log-probabilities (zero
        where not counted) and the tail log-sum-exps :math:`\log\sum_{l\ge t} e^{s_l}`.
    """
    if valid is not None:
        # A very negative finite fill: exp(fill - s) == 0 exactly, and unlike -inf it keeps
        # the backward pass of logcumsumexp free of NaN.
        fill = torch.finfo(scores.dtype).min
        scores = torch.where(valid, scores, torch.full_like(scores, fill))
    tail_lse = torch.logcumsumexp(scores.flip(-1), dim=-1).flip(-1)
    positions = torch.arange(scores.shape[-1], device=scores.device)
    counted = positions < n_stages.unsqueeze(-1)
    stage = torch.where(counted, scores - tail_lse, torch.zeros_like(scores))
    return stage, tail_lse


class Choice(PairwiseLogit):
    r"""Multinomial logit: the person picks the best of ``q`` options.

    Independent Gumbel noise of scale :math:`s` on each option's utility gives

    .. math::

        P(o_0 \text{ chosen from } o_0, \dots, o_{q-1})
            = \frac{e^{f(o_0)/s}}{\sum_j e^{f(o_j)/s}},

    which for ``q = 2`` is :class:`PairwiseLogit`'s :math:`\operatorname{sigmoid}(\delta/s)`
    exactly (pairs take the pairwise code path). In the difference coordinates
    :math:`\delta_j = f(o_0) - f(o_j)` with :math:`x_j = -\delta_j/s` (:math:`x_0 = 0`) and
    :math:`p = \operatorname{softmax}(x)`, the gradient is :math:`h_j = p_j / s` and the negative
    Hessian :math:`\hat H = (\operatorname{diag}(p) - p p^\top)_{j,l \ge 1} / s^2`, positive
    definite (its determinant is :math:`p_0 \prod_{j \ge 1} p_j / s^{2(q-1)}`) but nearly
    singular when an option is far worse than the others.

    Args:
        scale: The Gumbel scale :math:`s > 0`.
    """

    def __init__(self, scale: float = 1.0) -> None:
        """A multinomial-logit choice likelihood with Gumbel scale ``scale`` (:math:`s`)."""
        super().__init__(scale=scale)

    @property
    def supported_kinds(self) -> frozenset[ObservationKind]:
        return frozenset({ObservationKind.PAIR, ObservationKind.CHOICE})

    def _ranking_terms(
        self, delta: Tensor, n_stages: Tensor, valid: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        r"""Plackett-Luce log-probability, gradient and negative Hessian in :math:`\delta`.

        Stage :math:`t` chooses option :math:`t` among :math:`\{l \ge t\}` with softmax
        :math:`p^{(t)}`; :math:`\nabla_x \log P = \sum_t (e_t - p^{(t)})` and
        :math:`-\nabla^2_x \log P = \sum_t \operatorname{diag}(p^{(t)}) - p^{(t)} p^{(t)\top}`,
        mapped to :math:`\delta = -s x` (dropping :math:`x_0 = 0`).
        """
        s = self._scale
        x = torch.cat([torch.zeros_like(delta[..., :1]), -delta / s], dim=-1)
        stage, tail = plackett_luce_stages(x, n_stages, valid)
        Q = x.shape[-1]
        pos = torch.arange(Q, device=x.device)
        counted = pos < n_stages.unsqueeze(-1)  # stages t
        allowed = (
            counted.unsqueeze(-1)
            & (pos.unsqueeze(-1) <= pos.unsqueeze(-2))  # l >= t
            & valid.unsqueeze(-2)
        )
        # masked exponent first: an unmasked exp(x - tail) can overflow where the tail is all
        # padding, and torch.where would then pass 0 * inf = NaN to the backward pass
        zero = torch.zeros((), dtype=x.dtype, device=x.device)
        log_P = torch.where(allowed, x.unsqueeze(-2) - tail.unsqueeze(-1), zero)
        P = torch.where(allowed, torch.exp(log_P), zero)  # (..., stage t, option l)
        grad_x = counted.to(x.dtype) - P.sum(-2)
        neg_hess_x = torch.diag_embed(P.sum(-2)) - P.transpose(-1, -2) @ P
        return (
            stage.sum(-1),
            -grad_x[..., 1:] / s,
            neg_hess_x[..., 1:, 1:] / (s * s),
        )


class Ranking(Choice):
    r"""Plackett-Luce likelihood of full or top-k rankings of ``q`` options.

    A ranking :math:`o_0 \succ o_1 \succ \dots` with ``k`` counted stages has probability

    .. math::

        P = \prod_{t < k} \frac{e^{f(o_t)/s}}{\sum_{l \ge t} e^{f(o_l)/s}},

    a product of :class:`Choice` probabilities among the options not yet placed (the LFPL
    module's Plackett-Luce, :func:`plackett_luce_stages`). Gumbel noise of scale :math:`s` on
    each utility and sorting gives exactly this distribution. Choices (one stage) and pairs
    are special cases, so this likelihood models all three kinds.

    Args:
        scale: The Gumbel scale :math:`s > 0`.
    """

    @property
    def supported_kinds(self) -> frozenset[ObservationKind]:
        return frozenset({ObservationKind.PAIR, ObservationKind.CHOICE, ObservationKind.RANKING})
