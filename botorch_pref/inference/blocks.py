r"""The block engine: Laplace inference for choices, rankings and ties (and pairs among them).

Observation ``k`` lists options :math:`S_k = (o_0, \dots, o_{q_k - 1})`, best first
(:class:`~botorch_pref.likelihoods.ObservationKind`), and is written in difference coordinates

.. math::

    \delta_{k,j} = f(o_0) - f(o_j), \qquad j = 1, \dots, Q - 1,

with ``Q`` the largest option count (rows of shorter observations and padding observations are
zero rows). A rating of design ``i`` is a function of :math:`f(i)` alone: its first row is
``(i, -1)``, against the origin (:mod:`~botorch_pref.inference.rows`); a graded comparison uses
its first row as a pair or a tie does. The rows :math:`a_{k,j} = e_{o_0} - e_{o_j}` stack into
``A`` (``r x n``, :math:`r = m (Q-1)`); pairs and ties are the one-row case. The likelihood
(:meth:`~botorch_pref.likelihoods.PairwiseLikelihood.observation_derivatives`) gives each
observation's gradient :math:`h_k` and positive semi-definite negative Hessian block
:math:`H_k` in :math:`\delta_k`, so the curvature in row space is block diagonal,
:math:`H = \operatorname{blockdiag}(H_k)`, and

.. math::

    \nabla_f \log p = A^\top h, \qquad W = A^\top H A .

The comparison-space Newton iterate of :class:`~botorch_pref.inference.engine.LaplaceEngine`
is used in its factor-free form

.. math::

    \beta = c - H (I + K_A H)^{-1} K_A c ,

solved by LU: a choice's block is nearly singular when an option is far worse than the others
(its softmax weight vanishes) and padding rows are exactly zero, so a Cholesky of the blocks
would need jitter, and an eigen-factor's derivative is undefined at repeated eigenvalues (the
evidence differentiates through ``H``). :math:`K_A H` is similar to the PSD
:math:`H^{1/2} K_A H^{1/2}`, so :math:`I + K_A H` has real eigenvalues :math:`\ge 1` and its LU
meets no zero pivot in exact arithmetic; :math:`\log\det(I + K_A H) = \log\det(I_n + K W)`
(Sylvester) is its log-determinant.

The posterior factors (no autograd) use the symmetric square root of each block from its clamped
eigen-decomposition, so :math:`R = H^{1/2} A` has :math:`R^\top R = W` exactly for PSD blocks and
zero rows stay zero.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from botorch_pref.inference.engine import LaplaceEngine
from botorch_pref.likelihoods import ObservationKind, PairwiseLikelihood

__all__ = ["BlockEngine", "ObservationStructure", "build_observations"]


class ObservationStructure(NamedTuple):
    """Rows of a flat batch of general observations.

    Attributes:
        rows: ``B x r x 2`` long tensor, ``r = m (Q - 1)``: row ``k (Q-1) + j - 1`` is
            ``(o_0, o_j)`` of observation ``k``, or ``(0, 0)`` (a zero row of ``A``) where
            option ``j`` or the whole observation is padding.
        kind: ``B x m`` observation kinds.
        n_stages: ``B x m`` ranked stages.
        valid: ``B x m x Q`` bool mask of real options.
        kinds: The kinds present (Python ints), so no device synchronisation is needed later.
        level: ``B x m`` levels of graded comparisons and ratings (``-1`` elsewhere), or
            ``None`` when the data hold neither.
    """

    rows: Tensor
    kind: Tensor
    n_stages: Tensor
    valid: Tensor
    kinds: tuple[int, ...]
    level: Tensor | None = None

    @property
    def p(self) -> int:
        """Number of rows ``r`` (the comparison-space system size)."""
        return self.rows.shape[-2]

    @property
    def width(self) -> int:
        """Rows per observation, ``Q - 1``."""
        return self.valid.shape[-1] - 1


def build_observations(
    options: Tensor, kind: Tensor, n_stages: Tensor, level: Tensor | None = None
) -> ObservationStructure:
    """The :class:`ObservationStructure` of padded observations.

    Args:
        options: ``B x m x Q`` long tensor of design indices, best first, ``-1`` padding
            (validated by the caller: see :class:`botorch_pref.data.PreferenceData`).
        kind: ``B x m`` :class:`~botorch_pref.likelihoods.ObservationKind` values.
        n_stages: ``B x m`` ranked stages.
        level: ``B x m`` levels of graded comparisons and ratings, or ``None``.

    Returns:
        The structure.
    """
    options = options.long()
    if options.shape[-1] < 2:
        raise ValueError("observations need at least two option columns.")
    valid = options >= 0
    valid = valid & valid[..., :1]  # an observation without a first option is padding
    real_rows = valid[..., 1:]
    first = options[..., :1].expand_as(options[..., 1:])
    rows = torch.stack(
        [
            torch.where(real_rows, first, torch.zeros_like(first)),
            torch.where(real_rows, options[..., 1:], torch.zeros_like(first)),
        ],
        dim=-1,
    )
    B = options.shape[0]
    kinds = tuple(sorted(set(kind[valid[..., 0]].unique().tolist())))
    if int(ObservationKind.RATING) in kinds:  # a rating's first row: (i, -1), the origin
        rating = valid[..., 0] & (kind == int(ObservationKind.RATING))
        rows[..., 0, 0] = torch.where(rating, options[..., 0], rows[..., 0, 0])
        rows[..., 0, 1] = torch.where(rating, -1, rows[..., 0, 1])
    level = None if level is None else level.long()
    return ObservationStructure(
        rows.reshape(B, -1, 2), kind.long(), n_stages.long(), valid, kinds, level
    )


def _block_sqrt(H: Tensor) -> Tensor:
    """Symmetric square root of PSD blocks from their eigen-decomposition (clamped at zero)."""
    H = 0.5 * (H + H.transpose(-1, -2))
    evals, evecs = torch.linalg.eigh(H)
    return (evecs * evals.clamp_min(0).sqrt().unsqueeze(-2)) @ evecs.transpose(-1, -2)


class BlockEngine(LaplaceEngine):
    """Laplace engine for general observations: ``Q - 1`` rows each, block-diagonal curvature.

    Args:
        likelihood: The likelihood (it must model every kind present).
        structure: The observations (:func:`build_observations`).
        n: Number of designs.
    """

    def __init__(
        self, likelihood: PairwiseLikelihood, structure: ObservationStructure, n: int
    ) -> None:
        super().__init__(likelihood, structure.rows, n)
        self.structure = structure

    @classmethod
    def from_options(
        cls,
        likelihood: PairwiseLikelihood,
        options: Tensor,
        kind: Tensor,
        n_stages: Tensor,
        n: int,
    ) -> BlockEngine:
        """The engine of padded observations (see :func:`build_observations`)."""
        return cls(likelihood, build_observations(options, kind, n_stages), n)

    def terms(self, d: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Log-likelihood (``B``), row gradient ``h`` (``B x r``), blocks (``B x m x w x w``)."""
        s = self.structure
        B, m, w = d.shape[0], s.kind.shape[-1], s.width
        log_p, h, H = self.likelihood.observation_derivatives(
            d.reshape(B, m, w), s.kind, s.n_stages, s.valid, s.kinds, s.level
        )
        return log_p.sum(-1), h.reshape(B, -1), H

    def log_likelihood(self, d: Tensor) -> Tensor:
        return self.terms(d)[0]

    def apply_curvature(self, H: Tensor, v: Tensor) -> Tensor:
        B, m, w = H.shape[0], H.shape[1], H.shape[-1]
        if v.dim() == 2:
            return (H @ v.reshape(B, m, w, 1)).reshape(B, -1)
        return (H @ v.reshape(B, m, w, -1)).reshape(B, m * w, -1)

    def curvature_root(self, H: Tensor) -> Tensor:
        return _block_sqrt(H)

    def _comparison_system(self, K_A: Tensor, H: Tensor) -> Tensor:
        """:math:`I + K_A H` (``B x r x r``)."""
        system = self.apply_curvature(H.transpose(-1, -2), K_A.transpose(-1, -2))
        system = system.transpose(-1, -2)
        system.diagonal(dim1=-2, dim2=-1).add_(1.0)
        return system

    def comparison_step(self, K_A: Tensor, H: Tensor, c: Tensor) -> Tensor:
        t = (K_A @ c.unsqueeze(-1)).squeeze(-1)
        u = torch.linalg.solve(self._comparison_system(K_A, H), t.unsqueeze(-1)).squeeze(-1)
        return c - self.apply_curvature(H, u)

    def comparison_logdet(self, K_A: Tensor, H: Tensor) -> Tensor:
        return torch.linalg.slogdet(self._comparison_system(K_A, H))[1]

    def warm_key(self, n: int) -> Tensor:
        """The rows as ``B x m x (Q-1) x 2`` (observations keep their rows when appended)."""
        s = self.structure
        B, m = s.kind.shape
        return s.rows.reshape(B, m, s.width, 2)

    def match_warm(self, key: Tensor, beta: Tensor) -> Tensor | None:
        """Old coefficients where the old observations are a prefix of these, zero elsewhere."""
        new_rows = self.warm_key(self.n)
        B, m, w = new_rows.shape[:3]
        mo, wo = key.shape[1], key.shape[2]
        if mo > m or wo > w or not torch.equal(new_rows[:, :mo, :wo], key.to(new_rows.device)):
            return None
        beta0 = beta.new_zeros(B, m, w)
        beta0[:, :mo, :wo] = beta.reshape(B, mo, wo)
        return beta0.reshape(B, -1)
