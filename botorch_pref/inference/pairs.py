r"""The pair engine: Laplace inference for pairwise comparisons, with a diagonal curvature.

Comparisons ``(winner, loser)`` are merged into ``p`` distinct unordered pairs :math:`\{i, j\}`
with :math:`i < j` (:func:`merge_pairs`); pair ``k`` is the difference row
:math:`a_k = e_{i_k} - e_{j_k}`, with difference :math:`d_k = f_{i_k} - f_{j_k}`. A comparison on
pair ``k`` has the sign :math:`\sigma = +1` if its winner is :math:`i_k` and :math:`-1` otherwise,
and contributes :math:`\log F(\sigma d_k / s)` for the likelihood's link ``F``
(:mod:`botorch_pref.likelihoods`). Summing the comparisons of a pair gives the pair gradient
:math:`G_k` and curvature :math:`w_k > 0`, so that

.. math::

    \nabla_f \log p(C \mid f) = A^\top G, \qquad
    W = -\nabla^2_f \log p(C \mid f) = A^\top \operatorname{diag}(w) A ,

the weighted Laplacian of the comparison graph (:math:`W 1 = 0`, :math:`1^\top A^\top G = 0`).
The number of distinct pairs ``p``, not of comparisons, sets the cost.

With :math:`H = \operatorname{diag}(w)` the comparison-space Newton iterate of
:class:`~botorch_pref.inference.engine.LaplaceEngine` uses :math:`R_r = \operatorname{diag}
(\sqrt w)`:

.. math::

    \beta = c - \sqrt w \odot B^{-1} (\sqrt w \odot K_A c), \qquad
    B = I_p + \operatorname{diag}(\sqrt w) K_A \operatorname{diag}(\sqrt w),

solved by the Cholesky of ``B`` (eigenvalues :math:`\ge 1`, no jitter; in float32 it can fail
only at prior-to-noise scale ratios of 1e3 or more), and
:math:`\log\det(I + K_A H) = \log\det B = 2 \sum_k \log (L_B)_{kk}`.

**Graded comparisons and ratings** (:mod:`~botorch_pref.likelihoods.ordinal`) are functions of
one row each as well: a graded comparison ``(a, b)`` of the difference :math:`f_a - f_b` (its
sign as a pair's), a rating of design ``i`` of the row ``(i, -1)`` against the origin,
:math:`f_i` (:mod:`~botorch_pref.inference.rows`). The structure then carries each answer's
kind and level (:attr:`PairStructure.comp_kind`, :attr:`PairStructure.comp_level`) and the
curvature stays diagonal: the cost is that of the pairs they are about.

A cold start takes one Newton step from the standardised net wins of each design (wins minus
losses), scaled by the prior standard deviation, as BoTorch's ``PairwiseGP`` starts its solver.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from botorch_pref.inference.engine import LaplaceEngine, cholesky_of_system
from botorch_pref.inference.rows import row_differences, scatter_rows
from botorch_pref.likelihoods import ObservationKind, PairwiseLikelihood

__all__ = ["PairEngine", "PairStructure", "merge_pairs"]


class PairStructure(NamedTuple):
    """Distinct compared pairs of a flat batch of comparison sets.

    Attributes:
        pairs: ``B x p x 2`` long tensor of distinct unordered pairs ``(i, j)``, ``i < j``.
            Members with fewer than ``p`` pairs are padded with ``(0, 0)``, whose row of ``A``
            is zero, so padding never changes a result.
        comp_pair: ``B x m`` long tensor, the pair of each comparison.
        comp_sign: ``B x m`` tensor, ``+1`` where the comparison's winner is ``pairs[..., 0]``.
        num_pairs: ``B`` long tensor, the number of real pairs of each member.
        comp_weight: ``B x m`` tensor, ``1`` for a comparison and ``0`` for a padding row
            (members of a batch with fewer comparisons than others), or ``None`` when no row is
            padding.
        comp_kind: ``B x m`` :class:`~botorch_pref.likelihoods.ObservationKind` of each answer
            (pairs, graded comparisons, ratings), or ``None`` for pairs only.
        comp_level: ``B x m`` levels of graded comparisons and ratings (``-1`` elsewhere), or
            ``None`` for pairs only.
        kinds: The kinds present (Python ints; empty for pairs only).
    """

    pairs: Tensor
    comp_pair: Tensor
    comp_sign: Tensor
    num_pairs: Tensor
    comp_weight: Tensor | None = None
    comp_kind: Tensor | None = None
    comp_level: Tensor | None = None
    kinds: tuple[int, ...] = ()

    @property
    def p(self) -> int:
        """Padded number of pairs."""
        return self.pairs.shape[-2]


def merge_pairs(
    comparisons: Tensor,
    n: int,
    dtype: torch.dtype = torch.float64,
    kind: Tensor | None = None,
    level: Tensor | None = None,
) -> PairStructure:
    """Merge comparisons on the same unordered pair of designs.

    Args:
        comparisons: ``B x m x 2`` integer tensor of (winner, loser) rows; no row may compare a
            design with itself, and every index must lie in ``[0, n)`` (validated by the model),
            except padding rows ``(-1, -1)``, which let members of a batch hold different
            numbers of comparisons, and ratings' rows ``(i, -1)``. A padding row is given the
            null pair ``(0, 0)`` and weight 0.
        n: Number of designs.
        dtype: Floating dtype of the signs.
        kind: ``B x m`` kinds of the rows (graded comparisons ``(a, b)``, ratings ``(i, -1)``
            among pairs), or ``None`` for pairs only.
        level: ``B x m`` levels, with ``kind``.

    Returns:
        The :class:`PairStructure`; pairs are sorted by ``(i, j)`` within each member, a
        rating's pair ``(i, -1)`` after the pairs of ``i``.
    """
    comparisons = comparisons.long()
    B, m = comparisons.shape[0], comparisons.shape[1]
    device = comparisons.device
    padding = comparisons[..., 0] < 0
    comp_weight = None
    if bool(padding.any()):
        comparisons = comparisons.masked_fill(padding.unsqueeze(-1), 0)
        comp_weight = (~padding).to(dtype)
    # the origin (-1) is keyed as design n: a rating's row sorts as (i, n)
    comparisons = torch.where(comparisons < 0, n, comparisons)
    n1 = n + 1
    lo = comparisons.min(dim=-1).values
    hi = comparisons.max(dim=-1).values
    member = torch.arange(B, device=device).unsqueeze(-1)
    keys = (member * n1 + lo) * n1 + hi
    uniq, inverse = torch.unique(keys.reshape(-1), sorted=True, return_inverse=True)
    owner = torch.div(uniq, n1 * n1, rounding_mode="floor")
    counts = torch.bincount(owner, minlength=B)
    p = int(counts.max()) if uniq.numel() else 0
    start = torch.cumsum(counts, 0) - counts
    position = torch.arange(uniq.numel(), device=device) - start[owner]
    local = uniq - owner * n1 * n1
    pairs = torch.zeros(B, max(p, 1), 2, dtype=torch.long, device=device)
    pairs[owner, position, 0] = torch.div(local, n1, rounding_mode="floor")
    second = local % n1
    pairs[owner, position, 1] = torch.where(second == n, -1, second)
    comp_pair = position[inverse].reshape(B, m)
    comp_sign = torch.where(comparisons[..., 0] == lo, 1.0, -1.0).to(dtype)
    if comp_weight is not None:  # the null pair (0, 0) of padding rows is not a real pair
        slot = torch.arange(pairs.shape[1], device=device)
        null = (pairs == 0).all(-1) & (slot < counts.unsqueeze(-1))
        counts = counts - null.sum(-1)
    if kind is None:
        return PairStructure(pairs, comp_pair, comp_sign, counts, comp_weight)
    real = ~padding
    kinds = tuple(sorted(set(kind[real].unique().tolist())))
    return PairStructure(
        pairs, comp_pair, comp_sign, counts, comp_weight, kind.long(), level.long(), kinds
    )


def _comparison_system(K_A: Tensor, sqrt_w: Tensor) -> Tensor:
    r""":math:`B = I + R_r K_A R_r^\top` with :math:`R_r = \operatorname{diag}(\sqrt w)`."""
    eye = torch.eye(K_A.shape[-1], dtype=K_A.dtype, device=K_A.device)
    return eye + sqrt_w.unsqueeze(-1) * K_A * sqrt_w.unsqueeze(-2)


class PairEngine(LaplaceEngine):
    """Laplace engine for pairwise comparisons: one row per merged pair, diagonal curvature.

    Args:
        likelihood: The pairwise likelihood.
        structure: The merged comparisons (:func:`merge_pairs`).
        n: Number of designs.
    """

    def __init__(self, likelihood: PairwiseLikelihood, structure: PairStructure, n: int) -> None:
        super().__init__(likelihood, structure.pairs, n)
        self.structure = structure

    @classmethod
    def from_comparisons(
        cls, likelihood: PairwiseLikelihood, comparisons: Tensor, n: int, dtype: torch.dtype
    ) -> PairEngine:
        """The engine of ``B x m x 2`` (winner, loser) comparisons among ``n`` designs."""
        return cls(likelihood, merge_pairs(comparisons, n, dtype=dtype), n)

    @classmethod
    def from_answers(
        cls,
        likelihood: PairwiseLikelihood,
        rows: Tensor,
        kind: Tensor,
        level: Tensor,
        n: int,
        dtype: torch.dtype,
    ) -> PairEngine:
        """The engine of ``B x m x 2`` rows of pairs, graded comparisons and ratings.

        Args:
            likelihood: The likelihood (its levels match the data's).
            rows: ``(winner, loser)``, ``(a, b)`` or ``(i, -1)`` rows; ``(-1, -1)`` pads.
            kind: ``B x m`` kinds (:data:`~botorch_pref.likelihoods.SCALAR_KINDS` but ties).
            level: ``B x m`` levels (``-1`` on pairs and padding).
            n: Number of designs.
            dtype: Floating dtype.
        """
        return cls(likelihood, merge_pairs(rows, n, dtype, kind, level), n)

    def _answer_terms(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Each answer's log-likelihood and derivatives at its signed difference ``x``."""
        s = self.structure
        if s.comp_kind is None:
            return self.likelihood.derivatives(x)
        return self.likelihood.row_derivatives(x, s.comp_kind, s.comp_level, s.kinds)

    def log_likelihood(self, d: Tensor) -> Tensor:
        s = self.structure
        if s.comp_kind is not None:
            return self.terms(d)[0]
        log_p = self.likelihood.log_prob(s.comp_sign * d.gather(-1, s.comp_pair))
        if s.comp_weight is not None:
            log_p = log_p * s.comp_weight
        return log_p.sum(-1)

    def terms(self, d: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Log-likelihood (``B``), pair gradient ``G`` and curvature ``w`` (``B x p`` each)."""
        s = self.structure
        sign = s.comp_sign
        log_p, grad, neg_hess = self._answer_terms(sign * d.gather(-1, s.comp_pair))
        if s.comp_weight is not None:
            log_p, grad, neg_hess = (
                log_p * s.comp_weight,
                grad * s.comp_weight,
                neg_hess * s.comp_weight,
            )
        G = torch.zeros_like(d).scatter_add(-1, s.comp_pair, sign * grad)
        w = torch.zeros_like(d).scatter_add(-1, s.comp_pair, neg_hess)
        return log_p.sum(-1), G, w

    def apply_curvature(self, H: Tensor, v: Tensor) -> Tensor:
        return H * v if v.dim() == 2 else H.unsqueeze(-1) * v

    def curvature_root(self, H: Tensor) -> Tensor:
        return H.sqrt()

    def comparison_step(self, K_A: Tensor, H: Tensor, c: Tensor) -> Tensor:
        sw = H.sqrt()
        LB = cholesky_of_system(_comparison_system(K_A, sw))
        t = sw * (K_A @ c.unsqueeze(-1)).squeeze(-1)
        return c - sw * torch.cholesky_solve(t.unsqueeze(-1), LB).squeeze(-1)

    def comparison_logdet(self, K_A: Tensor, H: Tensor) -> Tensor:
        LB = cholesky_of_system(_comparison_system(K_A, H.sqrt()))
        return 2.0 * LB.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def initial_guess(self, K: Tensor) -> Tensor:
        """Pair differences of the standardised net wins, scaled by the prior deviation (a
        graded comparison votes by its sign, a rating not at all)."""
        s = self.structure
        B, n = K.shape[0], K.shape[-1]
        votes = s.comp_sign if s.comp_weight is None else s.comp_sign * s.comp_weight
        if s.comp_kind is not None:
            votes = votes * (s.comp_kind != int(ObservationKind.RATING)).to(votes)
        pair_wins = torch.zeros(B, s.p, dtype=K.dtype, device=K.device)
        pair_wins = pair_wins.scatter_add(-1, s.comp_pair, votes)
        net = scatter_rows(pair_wins, s.pairs, n)
        net = (net - net.mean(-1, keepdim=True)) / net.std(-1, keepdim=True).clamp_min(1e-12)
        scale = K.diagonal(dim1=-2, dim2=-1).mean(-1, keepdim=True).sqrt()
        return row_differences(net * scale, s.pairs)

    def warm_key(self, n: int) -> Tensor:
        """Key ``i * (n + 1) + j`` of each pair (``j = n`` for the origin of a rating's row);
        padding pairs get ``(n + 1)^2`` (never a real key)."""
        pairs = self.structure.pairs
        second = pairs[..., 1]
        keys = pairs[..., 0] * (n + 1) + torch.where(second < 0, n, second)
        return torch.where(keys == 0, (n + 1) ** 2, keys)

    def match_warm(self, key: Tensor, beta: Tensor) -> Tensor:
        """Old pairs' coefficients moved to the same pairs here (keys made for this ``n``)."""
        new_keys = self.warm_key(self.n)
        B = new_keys.shape[0]
        order = new_keys.argsort(-1)
        sorted_keys = new_keys.gather(-1, order)
        pos = torch.searchsorted(sorted_keys, key.contiguous()).clamp_max(sorted_keys.shape[-1] - 1)
        hit = sorted_keys.gather(-1, pos) == key
        target = order.gather(-1, pos)
        beta0 = torch.zeros(B, self.structure.p, dtype=beta.dtype, device=beta.device)
        return beta0.scatter_add(-1, target, torch.where(hit, beta, 0.0))
