r"""Laplace inference for general preference observations: choices, rankings, ties and pairs.

The pair engine of :mod:`botorch_pref.inference.laplace` handles data made of pairs only (and
stays the fast path for them). This module generalises it to observations over any set of
designs. Observation ``k`` lists options :math:`S_k = (o_0, \dots, o_{q_k - 1})`, best first
(:class:`~botorch_pref.likelihoods.ObservationKind`), and is written in difference coordinates

.. math::

    \delta_{k,j} = f(o_0) - f(o_j), \qquad j = 1, \dots, Q - 1,

with ``Q`` the largest option count (rows of shorter observations and padding observations are
zero rows). The rows :math:`a_{k,j} = e_{o_0} - e_{o_j}` are fixed, as the pair rows are, and
stack into ``A`` (``r x n``, :math:`r = m (Q-1)`); pairs and ties are the one-row case. The
likelihood (:meth:`~botorch_pref.likelihoods.PairwiseLikelihood.observation_derivatives`) gives
each observation's gradient :math:`h_k` and positive semi-definite negative Hessian block
:math:`\hat H_k` in :math:`\delta_k`, so in row space the curvature is block diagonal,
:math:`H = \operatorname{blockdiag}(\hat H_k)`, and

.. math::

    \nabla_f \log p = A^\top h, \qquad W = -\nabla_f^2 \log p = A^\top H A
    = \sum_k P_k^\top H_k P_k ,

where :math:`H_k` on the designs :math:`S_k` has rows summing to zero (like a pair's Laplacian).

**Comparison space** (``r <= n``). With :math:`K_A = A K A^\top` and :math:`c = H d + h`, the
Newton step for :math:`\Psi(f) = \log p - f^\top K^{-1} f / 2` is :math:`f = K A^\top \beta` with

.. math::

    \beta = c - H (I + K_A H)^{-1} K_A c .

This is the pair formula :math:`\beta = c - L B^{-1} L^\top K_A c`,
:math:`B = I + L^\top K_A L`, for ANY factor :math:`H = L L^\top`, by the push-through identity
:math:`L (I + L^\top K_A L)^{-1} L^\top = H (I + K_A H)^{-1}`. Using the right-hand side means
no block factor is needed in the Newton iterations or in the evidence: a choice's block is
nearly singular when an option is far worse than the others (its softmax weight vanishes), and
padding rows are exactly zero, so a Cholesky of the blocks would need jitter, and an
eigen-factor's derivative is undefined at repeated eigenvalues (the evidence differentiates
through :math:`H`). :math:`K_A H` is similar to the PSD :math:`L^\top K_A L`, so
:math:`I + K_A H` has real eigenvalues :math:`\ge 1` and its LU never meets a zero pivot in
exact arithmetic. The evidence's log-determinant is
:math:`\log\det(I + K_A H) = \log\det B = \log\det(I_n + K W)` (Sylvester).

**Design space** (``r > n``): :math:`(I + W K)\,\alpha = A^\top c`, :math:`f = K \alpha`, with
:math:`W K = A^\top H (A K)` formed in :math:`O(r n Q)`.

**Posterior factors** (no autograd): :math:`R = H^{1/2} A` with the symmetric square root of
each block from its (clamped) eigen-decomposition, so :math:`R^\top R = W` exactly for PSD
blocks and zero rows stay zero; in design space ``R`` is replaced by the triangular factor of
its QR decomposition, as for pairs. Everything downstream
(:class:`~botorch_pref.inference.laplace.LaplaceFactors`,
:func:`~botorch_pref.inference.laplace.predictive_terms`) is shared with the pair engine.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from botorch_pref.inference.laplace import (
    Form,
    LaplaceFactors,
    ModeResult,
    _pair_diff,
    _rows_diff,
    _scatter_pairs,
    _State,
    choose_form,
    damped_newton,
    default_tolerance,
    pair_gram,
)
from botorch_pref.likelihoods import PairwiseLikelihood

__all__ = [
    "ObservationStructure",
    "build_observations",
    "evidence_with_gradients",
    "find_mode",
    "laplace_factors",
    "observation_terms",
]


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
    """

    rows: Tensor
    kind: Tensor
    n_stages: Tensor
    valid: Tensor
    kinds: tuple[int, ...]

    @property
    def p(self) -> int:
        """Number of rows ``r`` (the comparison-space system size)."""
        return self.rows.shape[-2]

    @property
    def width(self) -> int:
        """Rows per observation, ``Q - 1``."""
        return self.valid.shape[-1] - 1


def build_observations(options: Tensor, kind: Tensor, n_stages: Tensor) -> ObservationStructure:
    """The :class:`ObservationStructure` of padded observations.

    Args:
        options: ``B x m x Q`` long tensor of design indices, best first, ``-1`` padding
            (validated by the caller: see :class:`botorch_pref.data.PreferenceData`).
        kind: ``B x m`` :class:`~botorch_pref.likelihoods.ObservationKind` values.
        n_stages: ``B x m`` ranked stages.

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
    return ObservationStructure(rows.reshape(B, -1, 2), kind.long(), n_stages.long(), valid, kinds)


def observation_terms(
    likelihood: PairwiseLikelihood, d: Tensor, structure: ObservationStructure
) -> tuple[Tensor, Tensor, Tensor]:
    """Log-likelihood (``B``), row gradient ``h`` (``B x r``) and blocks ``H`` (``B x m x w x w``).

    Args:
        likelihood: The likelihood.
        d: ``B x r`` row differences :math:`A f`.
        structure: The observations.

    Returns:
        ``(log_lik, h, H)``.
    """
    B, m, w = d.shape[0], structure.kind.shape[-1], structure.width
    log_p, h, H = likelihood.observation_derivatives(
        d.reshape(B, m, w), structure.kind, structure.n_stages, structure.valid, structure.kinds
    )
    return log_p.sum(-1), h.reshape(B, -1), H


def _apply_blocks(H: Tensor, v: Tensor) -> Tensor:
    """Block-diagonal ``H`` (``B x m x w x w``) times ``v`` (``B x r`` or ``B x r x k``)."""
    B, m, w = H.shape[0], H.shape[1], H.shape[-1]
    if v.dim() == 2:
        return (H @ v.reshape(B, m, w, 1)).reshape(B, -1)
    return (H @ v.reshape(B, m, w, -1)).reshape(B, m * w, -1)


def _right_blocks(M: Tensor, H: Tensor) -> Tensor:
    """``M`` (``B x k x r``) times block-diagonal ``H``."""
    return _apply_blocks(H.transpose(-1, -2), M.transpose(-1, -2)).transpose(-1, -2)


def _comparison_system(K_A: Tensor, H: Tensor) -> Tensor:
    """:math:`I + K_A H` (``B x r x r``)."""
    system = _right_blocks(K_A, H)
    system.diagonal(dim1=-2, dim2=-1).add_(1.0)
    return system


def _comparison_target(K_A: Tensor, H: Tensor, c: Tensor) -> Tensor:
    r""":math:`\beta = c - H (I + K_A H)^{-1} K_A c`."""
    t = (K_A @ c.unsqueeze(-1)).squeeze(-1)
    u = torch.linalg.solve(_comparison_system(K_A, H), t.unsqueeze(-1)).squeeze(-1)
    return c - _apply_blocks(H, u)


def _design_system(K: Tensor, AK: Tensor, H: Tensor, rows: Tensor) -> Tensor:
    r""":math:`I + W K = I + A^\top H (A K)`."""
    system = _scatter_pairs(_apply_blocks(H, AK), rows, K.shape[-1])
    system.diagonal(dim1=-2, dim2=-1).add_(1.0)
    return system


def find_mode(
    likelihood: PairwiseLikelihood,
    structure: ObservationStructure,
    K: Tensor,
    beta0: Tensor | None = None,
    *,
    d0: Tensor | None = None,
    form: Form | None = None,
    tol: float | None = None,
    max_iter: int = 100,
    max_halvings: int = 30,
) -> ModeResult:
    r"""Posterior mode by damped Newton with backtracking on :math:`\Psi` (no autograd).

    The same iteration as :func:`botorch_pref.inference.laplace.find_mode`, with the block
    curvature of general observations (module docstring). Starts from zero, from ``beta0``
    (:math:`f_0 = K A^\top \beta_0`) and from one Newton step at the row differences ``d0``,
    keeping the best.

    Args:
        likelihood: The likelihood (it must model every kind present).
        structure: The observations (:func:`build_observations`).
        K: ``B x n x n`` prior covariance.
        beta0: Optional ``B x r`` row coefficients.
        d0: Optional ``B x r`` row differences.
        form: ``"comparison"`` or ``"design"``; by size when ``None``.
        tol: Stopping tolerance on ``max |f_new - f| / max(1, max |f|)``.
        max_iter: Maximum Newton iterations.
        max_halvings: Maximum step halvings per line search.

    Returns:
        The :class:`~botorch_pref.inference.laplace.ModeResult` (``d`` and ``beta`` in row
        space, ``B x r``).
    """
    with torch.no_grad():
        B, n = K.shape[0], K.shape[-1]
        r = structure.p
        form = form or choose_form(n, r)
        tol = default_tolerance(K.dtype) if tol is None else tol
        rows = structure.rows
        comparison = form == "comparison"
        if comparison:
            AK, K_A = pair_gram(K, rows)
        else:
            AK = _rows_diff(K, rows)

        def to_f(coef: Tensor) -> Tensor:
            if comparison:
                return (coef.unsqueeze(-2) @ AK).squeeze(-2)
            return (K @ coef.unsqueeze(-1)).squeeze(-1)

        def state(coef: Tensor) -> _State:
            if comparison:
                d = (K_A @ coef.unsqueeze(-1)).squeeze(-1)
                quad = (coef * d).sum(-1)
            else:
                f = to_f(coef)
                d = _pair_diff(f, rows)
                quad = (coef * f).sum(-1)
            return _State(coef, d, observation_terms(likelihood, d, structure)[0], quad)

        def newton_target(d: Tensor) -> Tensor:
            _, h, H = observation_terms(likelihood, d, structure)
            c = _apply_blocks(H, d) + h
            if comparison:
                return _comparison_target(K_A, H, c)
            system = _design_system(K, AK, H, rows)
            b = _scatter_pairs(c, rows, n)
            return torch.linalg.solve(system, b.unsqueeze(-1)).squeeze(-1)

        current = state(K.new_zeros(B, r if comparison else n))
        starts = []
        if beta0 is not None:
            starts.append(state(beta0 if comparison else _scatter_pairs(beta0, rows, n)))
        if d0 is not None:
            starts.append(state(newton_target(d0)))
        current, f, iterations, converged = damped_newton(
            state,
            newton_target,
            to_f,
            [current, *starts],
            tol=tol,
            max_iter=max_iter,
            max_halvings=max_halvings,
        )

        log_lik, h, _ = observation_terms(likelihood, current.d, structure)
        return ModeResult(
            f=f,
            d=current.d,
            beta=current.coef if comparison else h,
            log_lik=log_lik,
            prior_quad=current.quad,
            iterations=iterations,
            converged=converged,
            form=form,
        )


def _block_sqrt(H: Tensor) -> Tensor:
    """Symmetric square root of PSD blocks from their eigen-decomposition (clamped at zero)."""
    H = 0.5 * (H + H.transpose(-1, -2))
    evals, evecs = torch.linalg.eigh(H)
    return (evecs * evals.clamp_min(0).sqrt().unsqueeze(-2)) @ evecs.transpose(-1, -2)


def laplace_factors(
    likelihood: PairwiseLikelihood,
    structure: ObservationStructure,
    K: Tensor,
    mode: ModeResult,
) -> LaplaceFactors:
    r"""Factor the Laplace posterior at the mode (no autograd).

    :math:`R = H^{1/2} A` (``r x n``, :math:`R^\top R = W`) in comparison space, with
    :math:`B = I + H^{1/2} K_A H^{1/2}` (eigenvalues :math:`\ge 1`, Cholesky without jitter);
    in design space the QR triangle of that ``R`` (``n x n``).

    Args:
        likelihood: The likelihood.
        structure: The observations.
        K: ``B x n x n`` prior covariance.
        mode: The mode from :func:`find_mode` for the same ``K``.

    Returns:
        The :class:`~botorch_pref.inference.laplace.LaplaceFactors`.
    """
    with torch.no_grad():
        _, h, H = observation_terms(likelihood, mode.d, structure)
        S = _block_sqrt(H)
        rows = structure.rows
        Bsz, r, n = rows.shape[0], rows.shape[1], K.shape[-1]
        A = K.new_zeros(Bsz, r, n)
        ones = K.new_ones(Bsz, r, 1)
        A.scatter_add_(-1, rows[..., :1], ones)
        A.scatter_add_(-1, rows[..., 1:], -ones)
        R = _apply_blocks(S, A)
        if mode.form == "comparison":
            K_A = pair_gram(K, rows)[1]
            system = _right_blocks(_apply_blocks(S, K_A), S)
        else:
            R = torch.linalg.qr(R, mode="r")[1]
            system = R @ K @ R.transpose(-1, -2)
        system = 0.5 * (system + system.transpose(-1, -2))
        system.diagonal(dim1=-2, dim2=-1).add_(1.0)
        L_B = torch.linalg.cholesky(system)
        M = torch.linalg.solve_triangular(L_B, R, upper=False)
        return LaplaceFactors(_scatter_pairs(h, rows, n), M)


def evidence_with_gradients(
    likelihood: PairwiseLikelihood,
    structure: ObservationStructure,
    K: Tensor,
    mode: ModeResult,
) -> tuple[Tensor, Tensor]:
    r"""Laplace evidence with exact hyperparameter gradients, and the differentiable mode.

    One Newton step with autograd from the detached mode (see
    :func:`botorch_pref.inference.laplace.evidence_with_gradients`): its derivative in the
    kernel's hyperparameters AND in the likelihood's (e.g. a tie threshold, which enters the
    gradient and curvature of the likelihood as torch operations) is the implicit-function
    derivative of the mode, and

    .. math::

        \log Z = \log p(\mathcal D \mid \hat f) - \tfrac12 \hat f^\top K^{-1}\hat f
                 - \tfrac12 \log\det(I + K_A H)

    (design space: :math:`\log\det(I + W K)`, the same number).

    Args:
        likelihood: The likelihood.
        structure: The observations.
        K: ``B x n x n`` prior covariance, differentiable in the hyperparameters.
        mode: The detached mode for (the values of) ``K``.

    Returns:
        ``(log_Z, f)``: ``B`` evidences and the ``B x n`` differentiable mode.
    """
    d0 = mode.d.detach()
    _, h, H = observation_terms(likelihood, d0, structure)
    c = _apply_blocks(H, d0) + h
    rows = structure.rows
    n = K.shape[-1]
    if mode.form == "comparison":
        AK, K_A = pair_gram(K, rows)
        beta = _comparison_target(K_A, H, c)
        d = (K_A @ beta.unsqueeze(-1)).squeeze(-1)
        f = (beta.unsqueeze(-2) @ AK).squeeze(-2)
        quad = (beta * d).sum(-1)
        log_lik, _, H_new = observation_terms(likelihood, d, structure)
        logdet = torch.linalg.slogdet(_comparison_system(K_A, H_new))[1]
    else:
        AK = _rows_diff(K, rows)
        b = _scatter_pairs(c, rows, n)
        alpha = torch.linalg.solve(_design_system(K, AK, H, rows), b.unsqueeze(-1)).squeeze(-1)
        f = (K @ alpha.unsqueeze(-1)).squeeze(-1)
        d = _pair_diff(f, rows)
        quad = (alpha * f).sum(-1)
        log_lik, _, H_new = observation_terms(likelihood, d, structure)
        logdet = torch.linalg.slogdet(_design_system(K, AK, H_new, rows))[1]
    return log_lik - 0.5 * quad - 0.5 * logdet, f
