r"""The Laplace engine: mode, posterior factors and evidence, written once for every curvature.

Observations are functions of differences :math:`d = A f` (:mod:`botorch_pref.inference.rows`,
``A`` is ``r x n``). An engine knows, at given differences, the log-likelihood, its gradient
``g`` in :math:`d` and its curvature ``H`` (the negative Hessian in :math:`d`, positive
semi-definite), so that

.. math::

    \nabla_f \log p = A^\top g, \qquad W = -\nabla_f^2 \log p = A^\top H A .

:class:`PairEngine <botorch_pref.inference.pairs.PairEngine>` has a diagonal ``H`` (one merged
pair per row); :class:`BlockEngine <botorch_pref.inference.blocks.BlockEngine>` a block-diagonal
one (one block per choice, ranking or tie). Everything else is here.

**Comparison space** (``r <= n``). With :math:`K_A = A K A^\top` and :math:`c = H d + g`, the
Newton step for :math:`\Psi(f) = \log p - f^\top K^{-1} f / 2` is :math:`f = K A^\top \beta`,

.. math::

    \beta = c - H (I + K_A H)^{-1} K_A c
          = c - R^\top_{\!r} B^{-1} R_r K_A c, \qquad B = I + R_r K_A R_r^\top,

for any square root :math:`H = R_r^\top R_r` (push-through identity). Every iterate has this
form, so :math:`f^\top K^{-1} f = \beta^\top d` needs no inverse of ``K``, and ``B``'s
eigenvalues are :math:`\ge 1`: no jitter.

**Design space** (``r > n``). :math:`(I + W K)\,\alpha = A^\top c` with :math:`f = K\alpha`,
which is :math:`f = (K^{-1} + W)^{-1} A^\top c` since :math:`(K^{-1} + W)^{-1} = K (I + WK)^{-1}`.
:math:`W K = A^\top H (A K)` costs :math:`O(r n)` per block column, and :math:`I + WK` is similar
to :math:`I + K^{1/2} W K^{1/2}` (eigenvalues :math:`\ge 1`).

**Posterior factors.** At the mode :math:`\hat f = K \hat\alpha` with
:math:`\hat\alpha = A^\top g(\hat d)`. With :math:`R = H^{1/2} A` (:math:`R^\top R = W`; in design
space the ``n x n`` triangle of its QR decomposition), :math:`L_B = \operatorname{chol}(I + R K
R^\top)` and :math:`M = L_B^{-1} R`, the predictive moments at test designs :math:`X_*` are

.. math::

    \mu(X_*) = k(X_*, X)\,\hat\alpha, \qquad
    \Sigma(X_*) = K_{**} - V^\top V, \quad V = M\,k(X, X_*),

the Laplace posterior :math:`K_{**} - k_*^\top (K + W^{-1})^{-1} k_*` without an inverse.

**Evidence.** :math:`\log Z = \log p(\mathcal D \mid \hat f) - \tfrac12 \hat f^\top K^{-1}\hat f
- \tfrac12 \log\det(I + K W)`, with :math:`\det(I + KW) = \det(I + K_A H)` (Sylvester). Its
hyperparameter gradient: find the mode without autograd, then take ONE Newton step with autograd
from the mode's detached coefficients (the correction of
:mod:`~botorch_pref.inference.newton`, solved from the gradient). The Newton map's Jacobian in
the coefficients vanishes at its fixed point, so the step's derivative in the hyperparameters
(through ``K`` and the likelihood) is the implicit-function-theorem derivative of the mode, and
evaluating :math:`H` at the new point carries the log-determinant's dependence on the mode.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, NamedTuple

import torch
from torch import Tensor

from botorch_pref.inference.newton import (
    Form,
    NewtonMaps,
    NewtonState,
    choose_form,
    damped_newton,
    default_tolerance,
)
from botorch_pref.inference.rows import (
    difference_matrix,
    row_differences,
    row_gram,
    rows_times,
    scatter_rows,
)
from botorch_pref.likelihoods import PairwiseLikelihood

__all__ = [
    "LaplaceEngine",
    "LaplaceFactors",
    "ModeResult",
    "WarmStart",
    "cholesky_of_system",
    "predictive_terms",
]


class ModeResult(NamedTuple):
    r"""The Laplace mode of a flat batch.

    Attributes:
        f: ``B x n`` posterior mode at the designs.
        d: ``B x r`` row differences at the mode.
        beta: ``B x r`` row coefficients, :math:`\hat f = K A^\top \beta` (in design space
            :math:`g(\hat d)`, which satisfies it at the exact mode).
        coef: The Newton iteration's own coefficients at the mode: :math:`\beta` in comparison
            space, ``B x n`` :math:`\alpha` with :math:`\hat f = K \alpha` in design space.
        log_lik: ``B`` log-likelihood at the mode.
        prior_quad: ``B`` value of :math:`\hat f^\top K^{-1} \hat f`.
        iterations: Newton iterations taken.
        converged: ``B`` bool tensor.
        form: The Newton form used.
    """

    f: Tensor
    d: Tensor
    beta: Tensor
    coef: Tensor
    log_lik: Tensor
    prior_quad: Tensor
    iterations: int
    converged: Tensor
    form: Form


class LaplaceFactors(NamedTuple):
    r"""Everything a posterior call needs, computed once per data set and hyperparameters.

    Attributes:
        alpha: ``B x n`` representer weights, :math:`\hat f = K \alpha`.
        M: ``B x r x n`` whitened curvature factor :math:`L_B^{-1} R` (``r = n`` in design
            space).
    """

    alpha: Tensor
    M: Tensor

    def index(self, idx: Tensor) -> LaplaceFactors:
        """The factors of the batch members ``idx`` (a long tensor)."""
        return LaplaceFactors(self.alpha[idx], self.M[idx])


class WarmStart(NamedTuple):
    """What a later mode search can reuse: the engine type, its row keys and coefficients."""

    engine: type
    key: Tensor
    beta: Tensor

    def expand(self, batch_shape: torch.Size, new_batch: torch.Size) -> WarmStart:
        """Broadcast a warm start of a ``batch_shape`` model to the flat ``new_batch``."""
        B_new = int(torch.Size(new_batch).numel())
        if self.key.shape[0] in (1, B_new):
            return self
        key = self.key.reshape(*batch_shape, *self.key.shape[1:])
        beta = self.beta.reshape(*batch_shape, *self.beta.shape[1:])
        key = key.expand(*new_batch, *key.shape[len(batch_shape) :])
        beta = beta.expand(*new_batch, *beta.shape[len(batch_shape) :])
        return WarmStart(
            self.engine,
            key.reshape(B_new, *key.shape[len(new_batch) :]),
            beta.reshape(B_new, *beta.shape[len(new_batch) :]),
        )


def predictive_terms(factors: LaplaceFactors, K_cross: Tensor) -> tuple[Tensor, Tensor]:
    r"""Predictive mean and the factor ``V`` of the covariance reduction at test designs.

    The covariance of the test designs is :math:`K_{**} - V^\top V`.

    Args:
        factors: The cached :class:`LaplaceFactors` (batch ``B``).
        K_cross: ``B x n x t`` prior covariance between training and test designs.

    Returns:
        ``(mean, V)``: the ``B x t`` mean and the ``B x r x t`` factor.
    """
    mean = (factors.alpha.unsqueeze(-2) @ K_cross).squeeze(-2)
    return mean, factors.M @ K_cross


def cholesky_of_system(system: Tensor) -> Tensor:
    r"""Lower Cholesky factor of a Laplace system :math:`B = I + S K S^\top`.

    :math:`B`'s eigenvalues are at least one in exact arithmetic, so the factorisation fails only
    where the stored matrix is not what exact arithmetic would give: where rounding makes it
    indefinite (in float32 when the prior's scale exceeds the answer noise's by about three
    orders of magnitude, an outputscale of 1000 over ``noise_std = 0.01``; in float64 only at
    scales near :math:`10^{16}`), or where an entry is not finite (a kernel or curvature that
    overflowed, as at a hyperparameter optimiser's far trial point).

    Args:
        system: ``B x p x p`` symmetric system.

    Returns:
        The lower-triangular factor.

    Raises:
        torch.linalg.LinAlgError: Where the factorisation fails, naming the cause and the remedy.
    """
    try:
        return torch.linalg.cholesky(system)
    except torch.linalg.LinAlgError as err:
        raise torch.linalg.LinAlgError(_system_failure(system, err)) from err


def _system_failure(system: Tensor, err: Exception) -> str:
    """Why :func:`cholesky_of_system` failed on ``system``, and what to do about it."""
    head = "The Laplace system I + R K R^T is not positive definite"
    if not torch.isfinite(system).all():
        return (
            f"{head}: it has non-finite entries (the kernel or the likelihood's curvature "
            f"overflowed at these hyperparameters or latent values). ({err})"
        )
    remedy = "Use a smaller outputscale."
    if system.dtype != torch.float64:
        remedy = "Use float64, or a smaller outputscale."
    return (
        f"{head} in {system.dtype}, by rounding (its eigenvalues are at least 1 in exact "
        f"arithmetic): the prior's scale exceeds the answer noise's by too much for this dtype. "
        f"{remedy} ({err})"
    )


def _symmetric_plus_identity(system: Tensor) -> Tensor:
    system = 0.5 * (system + system.transpose(-1, -2))
    system.diagonal(dim1=-2, dim2=-1).add_(1.0)
    return system


class LaplaceEngine(ABC):
    r"""Laplace inference for observations on difference rows; subclasses give the curvature.

    A subclass passes its rows (``B x r x 2``) to this constructor and implements the abstract
    curvature interface (:meth:`log_likelihood`, :meth:`terms`, :meth:`apply_curvature`,
    :meth:`curvature_root`, :meth:`comparison_step`, :meth:`comparison_logdet`, :meth:`warm_key`,
    :meth:`match_warm`); it may override :meth:`initial_guess`. The curvature ``H`` is whatever
    representation the subclass chooses (a ``B x r`` diagonal, ``B x m x w x w`` blocks); only
    the subclass reads it.

    Args:
        likelihood: The likelihood (it must model every observation kind present).
        rows: ``B x r x 2`` index pairs of the difference rows.
        n: Number of designs.
    """

    def __init__(self, likelihood: PairwiseLikelihood, rows: Tensor, n: int) -> None:
        self.likelihood = likelihood
        self.rows = rows
        self.n = int(n)

    # ------------------------------------------------------------ curvature interface
    @abstractmethod
    def log_likelihood(self, d: Tensor) -> Tensor:
        """Log-likelihood (``B``) at row differences ``d`` (``B x r``)."""

    @abstractmethod
    def terms(self, d: Tensor) -> tuple[Tensor, Tensor, Any]:
        """Log-likelihood (``B``), gradient ``g`` (``B x r``) and curvature ``H`` at ``d``."""

    @abstractmethod
    def apply_curvature(self, H: Any, v: Tensor) -> Tensor:
        """``H v`` for ``v`` of shape ``B x r`` or ``B x r x k``."""

    @abstractmethod
    def curvature_root(self, H: Any) -> Any:
        """A symmetric square root of ``H``, in the representation of ``H``."""

    @abstractmethod
    def comparison_step(self, K_A: Tensor, H: Any, c: Tensor) -> Tensor:
        r""":math:`c - H (I + K_A H)^{-1} K_A c` (``B x r``) for a right-hand side ``c``.

        From :math:`c = H d + g` this is the comparison-space Newton iterate; from the gradient's
        coefficients :math:`\rho = g - \beta` it is the Newton step
        (:mod:`~botorch_pref.inference.newton`).
        """

    @abstractmethod
    def comparison_logdet(self, K_A: Tensor, H: Any) -> Tensor:
        r""":math:`\log\det(I + K_A H)` (``B``), differentiable."""

    @abstractmethod
    def match_warm(self, key: Tensor, beta: Tensor) -> Tensor | None:
        """Row coefficients (``B x r``) from an earlier engine's ``(key, beta)``, or ``None``."""

    @abstractmethod
    def warm_key(self, n: int) -> Tensor:
        """A ``B x ...`` key of the rows, for :meth:`match_warm` of a later engine for ``n``."""

    def initial_guess(self, K: Tensor) -> Tensor | None:
        """A cold-start guess of the row differences (``B x r``), or ``None``."""
        return None

    # ------------------------------------------------------------ written once
    @property
    def num_rows(self) -> int:
        """Number of rows ``r`` (the comparison-space system size)."""
        return self.rows.shape[-2]

    def warm_start(self, mode: ModeResult, n: int) -> WarmStart:
        """The :class:`WarmStart` a later engine for ``n`` designs can take from ``mode``."""
        return WarmStart(type(self), self.warm_key(n), mode.beta)

    def warm_beta(self, warm: WarmStart) -> Tensor | None:
        """Starting coefficients from an earlier engine's :class:`WarmStart`, or ``None``."""
        if warm.engine is not type(self):
            return None
        key, beta = warm.key, warm.beta
        B = self.rows.shape[0]
        if key.shape[0] == 1 and B > 1:
            key, beta = key.expand(B, *key.shape[1:]), beta.expand(B, -1)
        if key.shape[0] != B:
            return None
        return self.match_warm(key, beta)

    def _design_system(self, K: Tensor, AK: Tensor, H: Any) -> Tensor:
        r""":math:`I + W K = I + A^\top H (A K)`."""
        system = scatter_rows(self.apply_curvature(H, AK), self.rows, K.shape[-1])
        system.diagonal(dim1=-2, dim2=-1).add_(1.0)
        return system

    def _newton_map(self, K: Tensor, form: Form) -> NewtonMaps:
        """The maps :func:`damped_newton` runs on, for prior covariance ``K``."""
        rows, n = self.rows, K.shape[-1]
        comparison = form == "comparison"
        if comparison:
            AK, K_A = row_gram(K, rows)
        else:
            AK = rows_times(K, rows)
        gram = K_A if comparison else K  # the prior quadratic is coef^T gram coef

        def to_f(coef: Tensor) -> Tensor:
            if comparison:  # f = K A^T beta
                return (coef.unsqueeze(-2) @ AK).squeeze(-2)
            return (K @ coef.unsqueeze(-1)).squeeze(-1)

        def state(coef: Tensor) -> NewtonState:
            if comparison:
                d = (K_A @ coef.unsqueeze(-1)).squeeze(-1)
                quad = (coef * d).sum(-1)
            else:
                f = to_f(coef)
                d = row_differences(f, rows)
                quad = (coef * f).sum(-1)
            return NewtonState(coef, d, self.log_likelihood(d), quad)

        def solve(H: Any, rhs: Tensor) -> Tensor:
            """``(I + K_A H)``-form solve (comparison) or ``(I + W K)^{-1} rhs`` (design)."""
            if comparison:
                return self.comparison_step(K_A, H, rhs)
            system = self._design_system(K, AK, H)
            # The row-major system's memory is its transpose in LAPACK's column-major order:
            # factor that without a copy and solve with the adjoint.
            LU, pivots, _ = torch.linalg.lu_factor_ex(system.mT)
            return torch.linalg.lu_solve(LU, pivots, rhs.unsqueeze(-1), adjoint=True).squeeze(-1)

        def start(d: Tensor) -> Tensor:
            _, g, H = self.terms(d)
            c = self.apply_curvature(H, d) + g
            return solve(H, c if comparison else scatter_rows(c, rows, n))

        def step(current: NewtonState) -> tuple[Tensor, Tensor]:
            _, g, H = self.terms(current.d)
            # The gradient of Psi in coefficient form: A^T g - K^{-1} f is A^T (g - beta) in
            # comparison space and A^T g - alpha in design space.
            residual = g - current.coef if comparison else scatter_rows(g, rows, n) - current.coef
            delta = solve(H, residual)
            decrement = (residual * (gram @ delta.unsqueeze(-1)).squeeze(-1)).sum(-1)
            return delta, decrement

        return NewtonMaps(state, step, start, to_f)

    def find_mode(
        self,
        K: Tensor,
        beta0: Tensor | None = None,
        *,
        d0: Tensor | None = None,
        form: Form | None = None,
        tol: float | None = None,
        max_iter: int = 100,
        max_halvings: int = 30,
    ) -> ModeResult:
        r"""Posterior mode by damped Newton (:func:`~botorch_pref.inference.newton.damped_newton`).

        Runs without autograd. Starts from zero, from ``beta0`` and from one Newton step at the
        differences ``d0`` (or, with neither, at :meth:`initial_guess`), keeping per member the
        start with the highest objective.

        Args:
            K: ``B x n x n`` prior covariance at the designs.
            beta0: Optional ``B x r`` warm start, :math:`f_0 = K A^\top \beta_0`.
            d0: Optional ``B x r`` guess of the row differences at the mode (e.g. the previous
                mode's when only the hyperparameters changed).
            form: ``"comparison"`` or ``"design"``; chosen by size when ``None``.
            tol: Stopping tolerance on ``max |f_new - f| / max(1, max |f|)``; dtype-aware default.
            max_iter: Maximum Newton iterations.
            max_halvings: Maximum step halvings per line search.

        Returns:
            The :class:`ModeResult`.
        """
        with torch.no_grad():
            B, n = K.shape[0], K.shape[-1]
            r = self.num_rows
            form = form or choose_form(n, r)
            tol = default_tolerance(K.dtype) if tol is None else tol
            comparison = form == "comparison"
            maps = self._newton_map(K, form)
            state = maps.state
            starts = [state(K.new_zeros(B, r if comparison else n))]
            if beta0 is not None:
                coef0 = beta0 if comparison else scatter_rows(beta0, self.rows, n)
                starts.append(state(coef0))
            if d0 is None and beta0 is None:
                d0 = self.initial_guess(K)
            if d0 is not None:
                starts.append(state(maps.start(d0)))
            current, f, iterations, converged = damped_newton(
                state,
                maps.step,
                maps.to_f,
                starts,
                tol=tol,
                max_iter=max_iter,
                max_halvings=max_halvings,
            )
            log_lik, g, _ = self.terms(current.d)
            return ModeResult(
                f=f,
                d=current.d,
                beta=current.coef if comparison else g,
                coef=current.coef,
                log_lik=log_lik,
                prior_quad=current.quad,
                iterations=iterations,
                converged=converged,
                form=form,
            )

    def laplace_factors(self, K: Tensor, mode: ModeResult) -> LaplaceFactors:
        r"""Factor the Laplace posterior at the mode (no autograd).

        :math:`R = H^{1/2} A` (``r x n``, :math:`R^\top R = W`) with
        :math:`B = I + H^{1/2} K_A H^{1/2}` in comparison space; in design space the ``n x n``
        QR triangle of that ``R``, with :math:`B = I + R K R^\top`. Either way ``B`` has
        eigenvalues of at least one, so its Cholesky needs no jitter.

        Args:
            K: ``B x n x n`` prior covariance.
            mode: The mode from :meth:`find_mode` for the same ``K``.

        Returns:
            The :class:`LaplaceFactors`.
        """
        with torch.no_grad():
            _, g, H = self.terms(mode.d)
            S = self.curvature_root(H)
            rows, n = self.rows, K.shape[-1]
            R = self.apply_curvature(S, difference_matrix(rows, n, K))
            if mode.form == "comparison":
                K_A = row_gram(K, rows)[1]
                SK = self.apply_curvature(S, K_A)
                system = self.apply_curvature(S, SK.transpose(-1, -2)).transpose(-1, -2)
            else:
                R = torch.linalg.qr(R, mode="r")[1]
                system = R @ K @ R.transpose(-1, -2)
            L_B = cholesky_of_system(_symmetric_plus_identity(system))
            M = torch.linalg.solve_triangular(L_B, R, upper=False)
            return LaplaceFactors(scatter_rows(g, rows, n), M)

    def evidence_with_gradients(self, K: Tensor, mode: ModeResult) -> tuple[Tensor, Tensor]:
        r"""Laplace evidence with exact hyperparameter gradients, and the differentiable mode.

        One Newton step with autograd from the detached mode (module docstring): its derivative
        in the kernel's hyperparameters and in the likelihood's (e.g. a tie threshold) is the
        implicit-function derivative of the mode, and

        .. math::

            \log Z = \log p(\mathcal D \mid \hat f) - \tfrac12 \hat f^\top K^{-1}\hat f
                     - \tfrac12 \log\det(I + K_A H)

        (design space: :math:`\log\det(I + W K)`, the same number).

        Args:
            K: ``B x n x n`` prior covariance, differentiable in the hyperparameters.
            mode: The detached mode for (the values of) ``K``.

        Returns:
            ``(log_Z, f)``: ``B`` evidences and the ``B x n`` differentiable mode.
        """
        coef0 = mode.coef.detach()
        rows, n = self.rows, K.shape[-1]
        if mode.form == "comparison":
            AK, K_A = row_gram(K, rows)
            _, g, H = self.terms((K_A @ coef0.unsqueeze(-1)).squeeze(-1))
            beta = coef0 + self.comparison_step(K_A, H, g - coef0)
            d = (K_A @ beta.unsqueeze(-1)).squeeze(-1)
            f = (beta.unsqueeze(-2) @ AK).squeeze(-2)
            quad = (beta * d).sum(-1)
            log_lik, _, H_new = self.terms(d)
            logdet = self.comparison_logdet(K_A, H_new)
        else:
            AK = rows_times(K, rows)
            _, g, H = self.terms(row_differences((K @ coef0.unsqueeze(-1)).squeeze(-1), rows))
            residual = scatter_rows(g, rows, n) - coef0
            alpha = coef0 + torch.linalg.solve(self._design_system(K, AK, H), residual)
            f = (K @ alpha.unsqueeze(-1)).squeeze(-1)
            d = row_differences(f, rows)
            quad = (alpha * f).sum(-1)
            log_lik, _, H_new = self.terms(d)
            logdet = torch.linalg.slogdet(self._design_system(K, AK, H_new))[1]
        return log_lik - 0.5 * quad - 0.5 * logdet, f
