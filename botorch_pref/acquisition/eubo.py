r"""Builders for BoTorch's EUBO and qEUBO on a preference model.

EUBO (Lin et al., 2022) scores a pair of designs by the expected utility of the better one,

.. math::

    \mathrm{EUBO}(x_1, x_2) = E[\max(g(x_1), g(x_2))]
    = \mu_2 + t\,h\big((\mu_1 - \mu_2)/t\big), \quad t^2 = v_1 + v_2 - 2 k_{12},

with :math:`h(u) = \phi(u) + u\Phi(u)`; qEUBO (Astudillo et al., 2023) is its Monte-Carlo
generalisation to :math:`q` options, :math:`E[\max_i g(x_i)]`. Both are BoTorch's classes
(``AnalyticExpectedUtilityOfBestOption``, ``qExpectedUtilityOfBestOption``). For a
:class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with a scaled RBF kernel,
:func:`make_eubo` and :func:`make_qeubo` return :class:`LaplaceEUBO` and :class:`LaplaceQEUBO`
instead: the same values and gradients, computed from the model's cached posterior factors in a
few tensor operations. :func:`make_qeubo` fixes the choice the optimisation loop needs: a seeded
scrambled-Sobol sampler, so that the acquisition surface is deterministic and L-BFGS can climb
it.
"""

from __future__ import annotations

import math

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.acquisition.analytic import AnalyticAcquisitionFunction
from botorch.acquisition.preference import (
    AnalyticExpectedUtilityOfBestOption,
    qExpectedUtilityOfBestOption,
)
from botorch.models.model import Model
from botorch.sampling.normal import SobolQMCNormalSampler
from botorch.utils.sampling import draw_sobol_normal_samples
from botorch.utils.transforms import t_batch_mode_transform
from gpytorch.kernels import RBFKernel, ScaleKernel
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from botorch_pref.models.pairwise import PairwiseLaplaceGP

__all__ = ["LaplaceEUBO", "LaplaceQEUBO", "make_eubo", "make_qeubo"]

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


class LaplaceEUBO(AnalyticAcquisitionFunction):
    r"""EUBO on pairs for a :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with a
    scaled RBF kernel, fused into a few tensor operations.

    The value is BoTorch's ``AnalyticExpectedUtilityOfBestOption``'s,

    .. math::

        \mathrm{EUBO}(x_1, x_2) = \mu_2 + t\,\phi(\Delta/t) + \Delta\,\Phi(\Delta/t),
        \quad \Delta = \mu_1 - \mu_2, \quad t^2 = v_1 + v_2 - 2 k_{12},

    computed straight from the model's cached factors (:meth:`PairwiseLaplaceGP.
    predictive_factors`): the kernel between the pair and the designs, one product with the
    representer weights for the means, one with the whitened curvature factor for the
    covariance reduction. It skips GPyTorch's kernel and distribution objects, whose per-call
    overhead dominates the small batches ``optimize_acqf`` evaluates (about 2.8 times faster per
    value and gradient at 100 designs); the values and gradients are the same (tested).

    Use :func:`make_eubo`, which returns this class when it applies (an ARD or isotropic
    ``ScaleKernel(RBFKernel)``, no input transform) and BoTorch's otherwise.

    Args:
        model: The model.
    """

    def __init__(self, model: PairwiseLaplaceGP) -> None:
        if not _fusable(model):
            raise ValueError(
                "LaplaceEUBO needs a PairwiseLaplaceGP with data, a ScaleKernel(RBFKernel) and "
                "no input transform; use make_eubo, which falls back to BoTorch's EUBO."
            )
        super().__init__(model=model)

    @t_batch_mode_transform(expected_q=2)
    def forward(self, X: Tensor) -> Tensor:
        """EUBO of the pairs ``X`` (``batch_shape x 2 x d``); returns ``batch_shape``."""
        Zs, scale, mean, V = _fused_moments(self.model, X)
        t = _difference_variance(Zs, scale, V).clamp_min(1e-12).sqrt()
        delta = mean[..., 0] - mean[..., 1]
        u = delta / t
        return (
            mean[..., 1]
            + t * _INV_SQRT_2PI * torch.exp(-0.5 * u * u)
            + delta * 0.5 * torch.erfc(-u / math.sqrt(2.0))
        )


class LaplaceQEUBO(AcquisitionFunction):
    r"""Monte-Carlo qEUBO, :math:`E[\max_{i \le q} g(x_i)]`, fused for a
    :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with a scaled RBF kernel.

    The value is BoTorch's ``qExpectedUtilityOfBestOption`` with a
    ``SobolQMCNormalSampler(num_samples, seed)``: the same scrambled-Sobol normal base samples
    :math:`z_s` (one set for every t-batch), the joint posterior's mean :math:`\mu` and
    covariance :math:`\Sigma` at the ``q`` options, :math:`L = \operatorname{chol}(\Sigma)`
    (jitter only if it fails, as GPyTorch), and

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
            as BoTorch's sampler does).
    """

    def __init__(self, model: PairwiseLaplaceGP, num_samples: int = 128, seed: int | None = None):
        if not _fusable(model):
            raise ValueError(
                "LaplaceQEUBO needs a PairwiseLaplaceGP with data, a ScaleKernel(RBFKernel) and "
                "no input transform; use make_qeubo, which falls back to BoTorch's qEUBO."
            )
        super().__init__(model=model)
        self.num_samples = _check_num_samples(num_samples)
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
        """``S x q x 1`` base samples, those of ``SobolQMCNormalSampler(S, seed)`` for ``q``."""
        key = (q, like.dtype, like.device)
        if key not in self._base:
            self._base[key] = draw_sobol_normal_samples(
                d=q, n=self.num_samples, device=like.device, dtype=like.dtype, seed=self.seed
            ).unsqueeze(-1)
        return self._base[key]

    @t_batch_mode_transform()
    def forward(self, X: Tensor) -> Tensor:
        """qEUBO of the ``batch_shape x q x d`` option sets ``X``; returns ``batch_shape``."""
        Zs, scale, mean, V = _fused_moments(self.model, X)
        sq = (Zs.unsqueeze(-2) - Zs.unsqueeze(-3)).square().sum(-1)  # ... x q x q
        cov = scale * torch.exp(-0.5 * sq) - V @ V.transpose(-1, -2)
        L = psd_safe_cholesky(cov)
        z = self._base_samples(X.shape[-2], mean)  # S x q x 1
        z = z.reshape(z.shape[0], *([1] * (L.dim() - 2)), *z.shape[-2:])  # S x 1.. x q x 1
        samples = mean.unsqueeze(-1) + L @ z  # S x ... x q x 1
        return samples.squeeze(-1).max(dim=-1).values.mean(dim=0)


def _fused_moments(model: PairwiseLaplaceGP, X: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""What the fused acquisitions need at ``X`` (``... x q x d``, model batch last in ``...``).

    Returns:
        ``(Zs, scale, mean, V)``: the inputs divided by the lengthscales (``... x q x d``), the
        outputscale (``(batch x) 1 x 1``), the posterior means (``... x q``) and
        :math:`V = k(X, \text{train}) M^\top` (``... x q x r``), so that the posterior
        covariance is :math:`k(X, X) - V V^\top`.
    """
    train_X, factors = model.predictive_factors()
    if X.shape[-1] != train_X.shape[-1]:
        raise ValueError(
            f"X has {X.shape[-1]} input dimensions, the model has {train_X.shape[-1]}."
        )
    kernel: ScaleKernel = model.covar_module
    batch = model.batch_shape
    ls = kernel.base_kernel.lengthscale.detach()  # (batch x) 1 x d or 1 x 1
    scale = kernel.outputscale.detach().reshape(*batch, 1, 1)
    alpha = factors.alpha.reshape(*batch, -1, 1)  # (batch x) n x 1
    M_t = factors.M.reshape(*batch, *factors.M.shape[-2:]).transpose(-1, -2)  # n x r
    Xs = train_X / ls
    Zs = X / ls
    # squared distances between the options and the designs: ... x q x n
    d2 = (
        Zs.square().sum(-1, keepdim=True)
        + Xs.square().sum(-1).unsqueeze(-2)
        - 2.0 * Zs @ Xs.transpose(-1, -2)
    ).clamp_min(0.0)
    K_cross = scale * torch.exp(-0.5 * d2)
    mean = (K_cross @ alpha).squeeze(-1)  # ... x q
    return Zs, scale, mean, K_cross @ M_t


def _difference_variance(Zs: Tensor, scale: Tensor, V: Tensor) -> Tensor:
    r"""Posterior variance of :math:`g(x_1) - g(x_2)` from :func:`_fused_moments`' terms.

    :math:`v_1 + v_2 - 2 k_{12} = 2 s - 2 s\,e^{-\|z_1 - z_2\|^2 / 2} - \|V_1 - V_2\|^2` for
    the first two options of ``... x q x d`` inputs; returns ``...``.
    """
    k12 = scale.squeeze(-1) * torch.exp(
        -0.5 * (Zs[..., 0, :] - Zs[..., 1, :]).square().sum(-1, keepdim=True)
    )
    var = (
        2.0 * scale.squeeze(-1)
        - 2.0 * k12
        - (V[..., 0, :] - V[..., 1, :]).square().sum(-1, keepdim=True)
    )
    return var.squeeze(-1)


def _fusable(model: Model) -> bool:
    kernel = getattr(model, "covar_module", None)
    return (
        isinstance(model, PairwiseLaplaceGP)
        and model.datapoints is not None
        and getattr(model, "input_transform", None) is None
        and type(kernel) is ScaleKernel
        and type(kernel.base_kernel) is RBFKernel
        and kernel.base_kernel.active_dims is None
        and len(model.batch_shape) <= 1
    )


def make_eubo(model: Model, previous_winner: Tensor | None = None) -> AcquisitionFunction:
    r"""Analytic EUBO on pairs (``q = 2``), or on ``q = 1`` challengers of a fixed design.

    For a :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with a scaled RBF kernel
    and no input transform this is the fused :class:`LaplaceEUBO` (same values, a fraction of
    the time); otherwise BoTorch's ``AnalyticExpectedUtilityOfBestOption``. With
    ``previous_winner`` :math:`c`, BoTorch's class returns :math:`E[(g(x) - g(c))^+]` (it drops
    the :math:`\mu(c)` term), which is :class:`~botorch_pref.acquisition.ChampionChallenger`'s
    value.

    Args:
        model: A preference model with ``datapoints`` (``PairwiseLaplaceGP``, ``PairwiseGP``).
        previous_winner: An optional ``1 x d`` design to challenge.

    Returns:
        The acquisition function.
    """
    if previous_winner is None and _fusable(model):
        return LaplaceEUBO(model)
    if previous_winner is not None:
        previous_winner = previous_winner.reshape(1, -1)
    return AnalyticExpectedUtilityOfBestOption(pref_model=model, previous_winner=previous_winner)


def make_qeubo(
    model: Model, num_samples: int = 128, seed: int | None = None
) -> AcquisitionFunction:
    r"""Monte-Carlo qEUBO, :math:`E[\max_{i \le q} g(x_i)]`, with a scrambled-Sobol sampler.

    For a :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with a scaled RBF kernel
    and no input transform this is the fused :class:`LaplaceQEUBO` (BoTorch's values and
    gradients, a fraction of the time); otherwise BoTorch's ``qExpectedUtilityOfBestOption``.

    Args:
        model: A preference model with a Gaussian posterior.
        num_samples: Quasi-Monte-Carlo samples of the joint posterior.
        seed: Seed of the Sobol scrambling (fixed base samples: a deterministic surface).

    Returns:
        The acquisition function.
    """
    num_samples = _check_num_samples(num_samples)
    if _fusable(model):
        return LaplaceQEUBO(model, num_samples=num_samples, seed=seed)
    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([num_samples]), seed=seed)
    return qExpectedUtilityOfBestOption(pref_model=model, sampler=sampler)


def _check_num_samples(num_samples: int) -> int:
    if isinstance(num_samples, bool) or int(num_samples) != num_samples or num_samples < 1:
        raise ValueError(f"num_samples must be a positive integer, got {num_samples!r}.")
    return int(num_samples)
