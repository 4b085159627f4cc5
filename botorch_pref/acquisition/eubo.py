r"""Builders for BoTorch's EUBO and qEUBO on a preference model.

EUBO (Lin et al., 2022) scores a pair of designs by the expected utility of the better one,

.. math::

    \mathrm{EUBO}(x_1, x_2) = E[\max(g(x_1), g(x_2))]
    = \mu_2 + t\,h\big((\mu_1 - \mu_2)/t\big), \quad t^2 = v_1 + v_2 - 2 k_{12},

with :math:`h(u) = \phi(u) + u\Phi(u)` (:mod:`botorch_pref.acquisition.improvement`); qEUBO
(Astudillo et al., 2023) is its Monte-Carlo generalisation to :math:`q` options,
:math:`E[\max_i g(x_i)]`. Both are BoTorch's classes (``AnalyticExpectedUtilityOfBestOption``,
``qExpectedUtilityOfBestOption``). For a :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP`
with a scaled RBF or Matern (3/2, 5/2) kernel, :func:`make_eubo` and :func:`make_qeubo` return
:class:`LaplaceEUBO` and :class:`LaplaceQEUBO` instead: the same values and gradients, computed
from the model's cached posterior factors in a few tensor operations
(:mod:`botorch_pref.acquisition.moments`).
:func:`make_qeubo` fixes the choice the optimisation loop needs: a seeded scrambled-Sobol
sampler, so that the acquisition surface is deterministic and L-BFGS can climb it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.acquisition.analytic import AnalyticAcquisitionFunction
from botorch.acquisition.preference import (
    AnalyticExpectedUtilityOfBestOption,
    qExpectedUtilityOfBestOption,
)
from botorch.models.model import Model
from botorch.sampling.normal import SobolQMCNormalSampler
from botorch.utils.transforms import t_batch_mode_transform
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from botorch_pref.acquisition.champion import MIN_VARIANCE
from botorch_pref.acquisition.improvement import expected_improvement_and_slopes
from botorch_pref.acquisition.moments import (
    MomentFactors,
    moment_factors,
    moments_from_factors,
    pair_moments_vjp,
    rbf_predictive_moments,
    supports_rbf_moments,
)
from botorch_pref.acquisition.sampling import MemberSobolSampler, member_seeds, member_sobol_normal
from botorch_pref.models.pairwise import PairwiseLaplaceGP

__all__ = ["LaplaceEUBO", "LaplaceQEUBO", "make_eubo", "make_qeubo"]


class LaplaceEUBO(AnalyticAcquisitionFunction):
    r"""EUBO on pairs for a :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with a
    scaled RBF or Matern (3/2, 5/2) kernel, fused into a few tensor operations.

    The value is BoTorch's ``AnalyticExpectedUtilityOfBestOption``'s,

    .. math::

        \mathrm{EUBO}(x_1, x_2) = \mu_2 + t\,\phi(\Delta/t) + \Delta\,\Phi(\Delta/t),
        \quad \Delta = \mu_1 - \mu_2, \quad t^2 = v_1 + v_2 - 2 k_{12},

    computed straight from the model's cached factors
    (:func:`~botorch_pref.acquisition.moments.rbf_predictive_moments`): the kernel between the
    pair and the designs, one product with the representer weights for the means, one with the
    whitened curvature factor for the covariance reduction. It skips GPyTorch's kernel and
    distribution objects, whose per-call overhead dominates the small batches ``optimize_acqf``
    evaluates; the values and gradients are the same (tested).

    The gradient in the pair is written out rather than traced through the moments by
    autograd (:func:`~botorch_pref.acquisition.moments.pair_moments_vjp` and the chain rule
    through the closed form), which saves about a third of a value-and-gradient evaluation.

    Use :func:`make_eubo`, which returns this class when it applies (an ARD or isotropic
    ``ScaleKernel`` of an RBF or Matern 3/2 or 5/2 kernel, no input transform) and BoTorch's
    otherwise.

    Args:
        model: The model.
    """

    def __init__(self, model: PairwiseLaplaceGP) -> None:
        if not supports_rbf_moments(model):
            raise ValueError(
                "LaplaceEUBO needs a PairwiseLaplaceGP with data, a ScaleKernel of an RBF or "
                "Matern 3/2 or 5/2 kernel and no input transform; use make_eubo, which falls "
                "back to BoTorch's EUBO."
            )
        super().__init__(model=model)

    @t_batch_mode_transform(expected_q=2)
    def forward(self, X: Tensor) -> Tensor:
        """EUBO of the pairs ``X`` (``batch_shape x 2 x d``); returns ``batch_shape``."""
        return _PairEUBO.apply(X, moment_factors(self.model))


class _PairEUBO(torch.autograd.Function):
    r"""EUBO of ``... x 2 x d`` pairs, its gradient by the chain rule written out.

    With :math:`u = \Delta / t`, the value's partial derivatives are :math:`\Phi(u)` in
    :math:`\mu_1`, :math:`1 - \Phi(u)` in :math:`\mu_2` and :math:`\phi(u) / (2t)` in
    :math:`t^2` (zero where :math:`t^2` is floored, a pair of one design twice);
    :func:`~botorch_pref.acquisition.moments.pair_moments_vjp` takes them to the pair.
    """

    @staticmethod
    def forward(ctx: FunctionCtx, X: Tensor, factors: MomentFactors) -> Tensor:
        moments = moments_from_factors(factors, X)
        var = moments.difference_variance()
        t = var.clamp_min(MIN_VARIANCE).sqrt()
        mean = moments.mean
        ei, cdf, pdf = expected_improvement_and_slopes(mean[..., 0] - mean[..., 1], t)
        ctx.factors, ctx.moments = factors, moments
        ctx.save_for_backward(var, t, cdf, pdf)
        return mean[..., 1] + ei

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad: Tensor) -> tuple[Tensor, None]:
        var, t, cdf, pdf = ctx.saved_tensors
        g_var = grad * pdf / (2.0 * t) * (var > MIN_VARIANCE)
        g_mean = torch.stack([grad * cdf, grad * (1.0 - cdf)], -1)
        return pair_moments_vjp(ctx.factors, ctx.moments, g_mean, g_var), None


class LaplaceQEUBO(AcquisitionFunction):
    r"""Monte-Carlo qEUBO, :math:`E[\max_{i \le q} g(x_i)]`, fused for a
    :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with a scaled RBF or Matern (3/2,
    5/2) kernel.

    The value is BoTorch's ``qExpectedUtilityOfBestOption`` with a
    ``SobolQMCNormalSampler(num_samples, seed)``: the same scrambled-Sobol normal base samples
    :math:`z_s` (one set for every t-batch, or one per member of a batched model), the joint
    posterior's mean :math:`\mu` and covariance :math:`\Sigma` at the ``q`` options,
    :math:`L = \operatorname{chol}(\Sigma)` (jitter only if it fails, as GPyTorch), and

    .. math::

        \mathrm{qEUBO}(x_{1:q}) = \frac{1}{S} \sum_s \max_i \, (\mu + L z_s)_i.

    :math:`\mu` and :math:`\Sigma` come straight from the model's cached factors, as in
    :class:`LaplaceEUBO`, without GPyTorch's kernel, distribution and posterior objects, whose
    per-call overhead dominates the small batches ``optimize_acqf`` evaluates. The values and
    gradients are BoTorch's (tested). Pending points are not supported.

    Use :func:`make_qeubo`, which returns this class when it applies and BoTorch's otherwise.

    Args:
        model: The model.
        num_samples: Quasi-Monte-Carlo samples :math:`S`.
        seed: Seed of the Sobol scrambling (``None``: drawn from torch's global generator once,
            as BoTorch's sampler does), or for a model with ``batch_shape = (R,)`` one seed per
            member: member ``r`` then sees the base samples of ``seed[r]``, as it would alone
            (:class:`~botorch_pref.acquisition.sampling.MemberSobolSampler`).
    """

    def __init__(
        self,
        model: PairwiseLaplaceGP,
        num_samples: int = 128,
        seed: int | Sequence[int] | None = None,
    ):
        if not supports_rbf_moments(model):
            raise ValueError(
                "LaplaceQEUBO needs a PairwiseLaplaceGP with data, a ScaleKernel of an RBF or "
                "Matern 3/2 or 5/2 kernel and no input transform; use make_qeubo, which falls "
                "back to BoTorch's qEUBO."
            )
        super().__init__(model=model)
        self.num_samples = _check_num_samples(num_samples)
        self.member_seeds: list[int] | None = None
        if isinstance(seed, Sequence):
            self.member_seeds = member_seeds(seed)
            if tuple(model.batch_shape) != (len(self.member_seeds),):
                raise ValueError(
                    f"got {len(self.member_seeds)} seeds for a model with batch_shape "
                    f"{tuple(model.batch_shape)}; give one seed per member of a (R,)-batched model."
                )
            seed = self.member_seeds[0]
        self.seed = int(torch.randint(0, 1000000, (1,)).item()) if seed is None else int(seed)
        self._base: dict[tuple, Tensor] = {}

    def set_X_pending(self, X_pending: Tensor | None = None) -> None:
        """Pending points are not supported (``None`` is accepted and ignored)."""
        if X_pending is not None:
            raise NotImplementedError(
                "LaplaceQEUBO has no pending points; use BoTorch's qExpectedUtilityOfBestOption."
            )
        self.X_pending = None

    def _base_samples(self, q: int, like: Tensor) -> Tensor:
        """``S x q x 1`` base samples, those of ``SobolQMCNormalSampler(S, seed)`` for ``q``
        (``S x R x q x 1`` with member seeds, member ``r``'s from ``seed[r]``)."""
        key = (q, like.dtype, like.device)
        if key not in self._base:
            seeds = self.member_seeds or [self.seed]
            n, kw = self.num_samples, {"dtype": like.dtype, "device": like.device}
            z = member_sobol_normal(seeds, n, q, **kw)
            self._base[key] = (z if self.member_seeds else z[:, 0]).unsqueeze(-1)
        return self._base[key]

    @t_batch_mode_transform()
    def forward(self, X: Tensor) -> Tensor:
        """qEUBO of the ``batch_shape x q x d`` option sets ``X``; returns ``batch_shape``."""
        moments = rbf_predictive_moments(self.model, X)
        mean = moments.mean
        L = psd_safe_cholesky(moments.covariance())
        z = self._base_samples(X.shape[-2], mean)  # S x [R x] q x 1
        lead = L.dim() - z.dim() + 1  # t-batch dimensions the samples are shared along
        z = z.reshape(z.shape[0], *([1] * lead), *z.shape[1:])  # S x 1.. x [R x] q x 1
        samples = mean.unsqueeze(-1) + L @ z  # S x ... x q x 1
        return samples.squeeze(-1).max(dim=-1).values.mean(dim=0)


def make_eubo(model: Model, previous_winner: Tensor | None = None) -> AcquisitionFunction:
    r"""Analytic EUBO on pairs (``q = 2``), or on ``q = 1`` challengers of a fixed design.

    For a :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with a scaled RBF or Matern
    (3/2, 5/2) kernel and no input transform this is the fused :class:`LaplaceEUBO` (same values,
    a fraction of the time); otherwise BoTorch's ``AnalyticExpectedUtilityOfBestOption``. With
    ``previous_winner`` :math:`c`, BoTorch's class returns :math:`E[(g(x) - g(c))^+]` (it drops
    the :math:`\mu(c)` term), which is :class:`~botorch_pref.acquisition.ChampionChallenger`'s
    value.

    Args:
        model: A preference model with ``datapoints`` (``PairwiseLaplaceGP``, ``PairwiseGP``).
        previous_winner: An optional ``1 x d`` design to challenge.

    Returns:
        The acquisition function.
    """
    if previous_winner is None and supports_rbf_moments(model):
        return LaplaceEUBO(model)
    if previous_winner is not None:
        previous_winner = previous_winner.reshape(1, -1)
    return AnalyticExpectedUtilityOfBestOption(pref_model=model, previous_winner=previous_winner)


def make_qeubo(
    model: Model, num_samples: int = 128, seed: int | Sequence[int] | None = None
) -> AcquisitionFunction:
    r"""Monte-Carlo qEUBO, :math:`E[\max_{i \le q} g(x_i)]`, with a scrambled-Sobol sampler.

    For a :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with a scaled RBF or Matern
    (3/2, 5/2) kernel and no input transform this is the fused :class:`LaplaceQEUBO` (BoTorch's
    values and gradients, a fraction of the time); otherwise BoTorch's
    ``qExpectedUtilityOfBestOption``.

    Args:
        model: A preference model with a Gaussian posterior.
        num_samples: Quasi-Monte-Carlo samples of the joint posterior.
        seed: Seed of the Sobol scrambling (fixed base samples: a deterministic surface); for
            a model with ``batch_shape = (R,)``, optionally one seed per member, so that each
            member sees the base samples it would see alone.

    Returns:
        The acquisition function.
    """
    num_samples = _check_num_samples(num_samples)
    if supports_rbf_moments(model):
        return LaplaceQEUBO(model, num_samples=num_samples, seed=seed)
    shape = torch.Size([num_samples])
    if isinstance(seed, Sequence):
        sampler = MemberSobolSampler(shape, seeds=seed)
    else:
        sampler = SobolQMCNormalSampler(sample_shape=shape, seed=seed)
    return qExpectedUtilityOfBestOption(pref_model=model, sampler=sampler)


def _check_num_samples(num_samples: int) -> int:
    if isinstance(num_samples, bool) or int(num_samples) != num_samples or num_samples < 1:
        raise ValueError(f"num_samples must be a positive integer, got {num_samples!r}.")
    return int(num_samples)
