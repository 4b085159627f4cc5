r"""Predictive moments of a preference GP with a scaled RBF kernel, in a few tensor operations.

Acquisition optimisers evaluate the joint posterior at small batches of ``q`` designs a hundred
or more times per query; GPyTorch's kernel, distribution and posterior objects then cost more
than the arithmetic. For a :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with the
kernel :math:`k(x, x') = s\, \exp(-\tfrac12 \|z - z'\|^2)`, :math:`z = x / \ell` (a
``ScaleKernel(RBFKernel)``, ARD or isotropic), and the model's cached Laplace factors
(:meth:`~botorch_pref.models.pairwise.PairwiseLaplaceGP.predictive_factors`: representer weights
:math:`\alpha` and whitened curvature factor ``M``), the posterior at designs :math:`X_*` is

.. math::

    \mu = k(X_*, X)\,\alpha, \qquad
    \Sigma = k(X_*, X_*) - V V^\top, \quad V = k(X_*, X)\, M^\top,

and the variance of a difference :math:`g(x_1) - g(x_2)` is

.. math::

    t^2 = v_1 + v_2 - 2 k_{12} = 2 s - 2 s\, e^{-\|z_1 - z_2\|^2 / 2} - \|V_1 - V_2\|^2 .

:func:`rbf_predictive_moments` computes these straight from the factors; the values and
gradients in ``X`` are those of ``model.posterior`` (tested). The hyperparameters enter as
detached values: acquisition functions differentiate in ``X`` only.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from botorch.models.model import Model
from gpytorch.kernels import RBFKernel, ScaleKernel
from torch import Tensor

from botorch_pref.models.pairwise import PairwiseLaplaceGP

__all__ = ["RBFMoments", "rbf_predictive_moments", "supports_rbf_moments"]


class RBFMoments(NamedTuple):
    r"""Joint posterior moments at ``... x q`` designs, in the form the acquisitions use.

    Attributes:
        Z: ``... x q x d`` designs divided by the lengthscales.
        outputscale: The outputscale ``s`` (``(batch x) 1 x 1``).
        mean: ``... x q`` posterior means.
        V: ``... x q x r`` covariance-reduction factor: :math:`\Sigma = k(X_*, X_*) - V V^\top`.
    """

    Z: Tensor
    outputscale: Tensor
    mean: Tensor
    V: Tensor

    def covariance(self) -> Tensor:
        """The ``... x q x q`` joint posterior covariance."""
        sq = (self.Z.unsqueeze(-2) - self.Z.unsqueeze(-3)).square().sum(-1)
        return self.outputscale * torch.exp(-0.5 * sq) - self.V @ self.V.transpose(-1, -2)

    def variance(self, i: int) -> Tensor:
        r"""Posterior variance (``...``) of option ``i``: :math:`s - \|V_i\|^2`."""
        scale = self.outputscale.reshape(self.outputscale.shape[:-2])
        return scale - self.V[..., i, :].square().sum(-1)

    def difference_variance(self) -> Tensor:
        r"""Posterior variance (``...``) of :math:`g(x_1) - g(x_2)` for the first two options."""
        s = self.outputscale.squeeze(-1)
        dz = self.Z[..., 0, :] - self.Z[..., 1, :]
        k12 = s * torch.exp(-0.5 * dz.square().sum(-1, keepdim=True))
        dV = self.V[..., 0, :] - self.V[..., 1, :]
        var = 2.0 * s - 2.0 * k12 - dV.square().sum(-1, keepdim=True)
        return var.squeeze(-1)


def supports_rbf_moments(model: Model) -> bool:
    """Whether :func:`rbf_predictive_moments` applies to ``model``.

    It does for a :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with data, no input
    transform, a batch shape of at most one dimension and a ``ScaleKernel(RBFKernel)`` on all
    inputs.
    """
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


def rbf_predictive_moments(model: PairwiseLaplaceGP, X: Tensor) -> RBFMoments:
    """Joint posterior moments at ``X`` (``... x q x d``, the model's batch last in ``...``).

    Args:
        model: A model for which :func:`supports_rbf_moments` holds.
        X: Designs in the model's input space.

    Returns:
        The :class:`RBFMoments`.
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
    return RBFMoments(Zs, scale, mean, K_cross @ M_t)
