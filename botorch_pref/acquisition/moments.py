r"""Predictive moments of a preference GP with a scaled RBF or Matern kernel, in a few tensor ops.

Acquisition optimisers evaluate the joint posterior at small batches of ``q`` designs a hundred
or more times per query; GPyTorch's kernel, distribution and posterior objects then cost more
than the arithmetic. For a :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with the
kernel :math:`k(x, x') = s\, \rho(\|z - z'\|^2)`, :math:`z = x / \ell` (a
``ScaleKernel(RBFKernel)`` with :math:`\rho(r^2) = e^{-r^2/2}`, or a
``ScaleKernel(MaternKernel)`` of smoothness :math:`\nu = 5/2` or :math:`3/2` with
:math:`\rho = (1 + \sqrt 5 r + \tfrac53 r^2) e^{-\sqrt 5 r}` or
:math:`(1 + \sqrt 3 r) e^{-\sqrt 3 r}`; ARD or isotropic), and the model's cached Laplace factors
(:meth:`~botorch_pref.models.pairwise.PairwiseLaplaceGP.predictive_factors`: representer weights
:math:`\alpha` and whitened curvature factor ``M``), the posterior at designs :math:`X_*` is

.. math::

    \mu = k(X_*, X)\,\alpha, \qquad
    \Sigma = k(X_*, X_*) - V V^\top, \quad V = k(X_*, X)\, M^\top,

and the variance of a difference :math:`g(x_1) - g(x_2)` is

.. math::

    t^2 = v_1 + v_2 - 2 k_{12} = 2 s - 2 s\, \rho(\|z_1 - z_2\|^2) - \|V_1 - V_2\|^2 .

:func:`rbf_predictive_moments` computes these straight from the factors
(:func:`moment_factors`, :func:`moments_from_factors`); the values and gradients in ``X`` are
those of ``model.posterior`` (tested). The hyperparameters enter as detached values:
acquisition functions differentiate in ``X`` only. For pairs, :func:`pair_moments` gives the
two means and :math:`t^2` with their gradient written out (:func:`pair_moments_vjp`) instead of
traced by autograd, which costs less.
"""

from __future__ import annotations

import math
import weakref
from typing import NamedTuple

import torch
from botorch.models.model import Model
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel
from gpytorch.means import ConstantMean
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from botorch_pref.models.pairwise import PairwiseLaplaceGP
from botorch_pref.models.posterior import prior_constant

__all__ = [
    "MomentFactors",
    "RBFMoments",
    "correlation",
    "correlation_slope",
    "design_centre",
    "moment_factors",
    "moments_from_factors",
    "pair_moments",
    "pair_moments_vjp",
    "rbf_predictive_moments",
    "supports_rbf_moments",
]


def correlation(sq: Tensor, nu: float | None = None) -> Tensor:
    r"""The kernel's correlation :math:`\rho` at squared scaled distances ``sq``.

    Args:
        sq: Squared distances :math:`r^2` between designs divided by the lengthscales.
        nu: ``None`` for the RBF kernel, else the Matern smoothness (2.5 or 1.5).

    Returns:
        :math:`\rho(r^2)`, of ``sq``'s shape. At :math:`r = 0` the gradient is zero (the
        Matern correlations of smoothness 3/2 and 5/2 are flat there).
    """
    if nu is None:
        return torch.exp(-0.5 * sq)
    r = sq.clamp_min(1e-30).sqrt()
    if nu == 2.5:
        a = math.sqrt(5.0) * r
        return (1.0 + a + a.square() / 3.0) * torch.exp(-a)
    if nu == 1.5:
        a = math.sqrt(3.0) * r
        return (1.0 + a) * torch.exp(-a)
    raise ValueError(f"no correlation for a Matern kernel of smoothness {nu}.")


def correlation_slope(sq: Tensor, nu: float | None = None) -> Tensor:
    r"""The derivative :math:`\rho'(r^2) = d\rho / d(r^2)` of :func:`correlation`.

    .. math::

        \rho'_{\text{RBF}} = -\tfrac12 e^{-r^2/2}, \qquad
        \rho'_{3/2} = -\tfrac32 e^{-\sqrt 3 r}, \qquad
        \rho'_{5/2} = -\tfrac56 (1 + \sqrt 5 r)\, e^{-\sqrt 5 r},

    all finite at :math:`r = 0`. The gradient of :math:`\rho(\|z - z'\|^2)` in :math:`z` is
    :math:`2 \rho'\,(z - z')`.

    Args:
        sq: Squared scaled distances :math:`r^2 \ge 0`.
        nu: ``None`` for the RBF kernel, else the Matern smoothness (2.5 or 1.5).

    Returns:
        :math:`\rho'(r^2)`, of ``sq``'s shape.
    """
    if nu is None:
        return -0.5 * torch.exp(-0.5 * sq)
    r = sq.clamp_min(0.0).sqrt()
    if nu == 2.5:
        a = math.sqrt(5.0) * r
        return -(5.0 / 6.0) * (1.0 + a) * torch.exp(-a)
    if nu == 1.5:
        return -1.5 * torch.exp(-math.sqrt(3.0) * r)
    raise ValueError(f"no correlation for a Matern kernel of smoothness {nu}.")


class MomentFactors(NamedTuple):
    r"""What the posterior moments at new designs need from a model, detached.

    Attributes:
        train_Z: ``(batch x) n x d`` transformed training designs divided by the lengthscales,
            minus ``centre``.
        lengthscale: ``(batch x) 1 x d`` (ARD) or ``(batch x) 1 x 1`` lengthscales.
        outputscale: ``(batch x) 1 x 1`` outputscale :math:`s`.
        alpha: ``(batch x) n x 1`` representer weights :math:`\alpha`.
        M_t: ``(batch x) n x r`` transposed whitened curvature factor :math:`M^\top`.
        nu: ``None`` for the RBF kernel, else the Matern kernel's smoothness.
        constant: The prior mean :math:`c` (``mean_module.constant``, zero unless set), which
            shifts every posterior mean.
        centre: ``(batch x) 1 x d`` shift of the scaled designs (:func:`design_centre`),
            subtracted from new designs as from the training ones; ``None``: no shift.
    """

    train_Z: Tensor
    lengthscale: Tensor
    outputscale: Tensor
    alpha: Tensor
    M_t: Tensor
    nu: float | None
    constant: Tensor
    centre: Tensor | None = None


class RBFMoments(NamedTuple):
    r"""Joint posterior moments at ``... x q`` designs, in the form the acquisitions use.

    Attributes:
        Z: ``... x q x d`` designs divided by the lengthscales, minus the factors' ``centre``
            (differences of designs are all that is read from it).
        outputscale: The outputscale ``s`` (``(batch x) 1 x 1``).
        mean: ``... x q`` posterior means.
        V: ``... x q x r`` covariance-reduction factor: :math:`\Sigma = k(X_*, X_*) - V V^\top`.
        nu: ``None`` for the RBF kernel, else the Matern kernel's smoothness.
        sq: ``... x q x n`` squared scaled distances from the designs to the training designs
            (``None`` where not computed).
    """

    Z: Tensor
    outputscale: Tensor
    mean: Tensor
    V: Tensor
    nu: float | None = None
    sq: Tensor | None = None

    def covariance(self) -> Tensor:
        """The ``... x q x q`` joint posterior covariance."""
        sq = (self.Z.unsqueeze(-2) - self.Z.unsqueeze(-3)).square().sum(-1)
        rho = correlation(sq, self.nu)
        return self.outputscale * rho - self.V @ self.V.transpose(-1, -2)

    def variance(self, i: int) -> Tensor:
        r"""Posterior variance (``...``) of option ``i``: :math:`s - \|V_i\|^2`."""
        scale = self.outputscale.reshape(self.outputscale.shape[:-2])
        return scale - self.V[..., i, :].square().sum(-1)

    def difference_variance(self) -> Tensor:
        r"""Posterior variance (``...``) of :math:`g(x_1) - g(x_2)` for the first two options."""
        s = self.outputscale.squeeze(-1)
        dz = self.Z[..., 0, :] - self.Z[..., 1, :]
        k12 = s * correlation(dz.square().sum(-1, keepdim=True), self.nu)
        dV = self.V[..., 0, :] - self.V[..., 1, :]
        var = 2.0 * s - 2.0 * k12 - dV.square().sum(-1, keepdim=True)
        return var.squeeze(-1)


def supports_rbf_moments(model: Model) -> bool:
    r"""Whether :func:`rbf_predictive_moments` applies to ``model``.

    It does for a :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with data, no input
    transform, a batch shape of at most one dimension, a ``ConstantMean`` (the default) and a
    ``ScaleKernel`` of an ``RBFKernel`` or a ``MaternKernel`` with :math:`\nu \in \{3/2, 5/2\}`
    on all inputs (``active_dims`` of neither kernel set: the moments scale every input).
    """
    kernel = getattr(model, "covar_module", None)
    if type(kernel) is not ScaleKernel:
        return False
    base = kernel.base_kernel
    smooth = type(base) is RBFKernel or (type(base) is MaternKernel and base.nu in (1.5, 2.5))
    return (
        isinstance(model, PairwiseLaplaceGP)
        and model.datapoints is not None
        and getattr(model, "input_transform", None) is None
        and smooth
        and kernel.active_dims is None
        and base.active_dims is None
        and len(model.batch_shape) <= 1
        and type(model.mean_module) is ConstantMean
    )


def design_centre(Z: Tensor) -> Tensor:
    r"""A shift of the scaled training designs ``Z`` that keeps expanded squared distances exact.

    :func:`moments_from_factors` expands :math:`\|z - z'\|^2 = \|z\|^2 + \|z'\|^2 - 2 z^\top
    z'`, whose rounding error is about :math:`\epsilon (\|z\|^2 + \|z'\|^2)`: for designs far
    from the origin relative to their spread (float32 designs at 100 + [0, 1) with lengthscale
    0.2 lie 500 lengthscales out) it swamps distances of order one. Shifting all designs by
    their mean :math:`m` leaves the distances unchanged and brings the error down to
    :math:`\epsilon` times the squared spread, as GPyTorch's ``sq_dist`` does. The shift is
    :math:`m_j` only in the coordinates where it matters,

    .. math::

        |m_j| > 4\,(\max_i Z_{ij} - \min_i Z_{ij}) \quad\text{and}\quad |m_j| > 8,

    and exactly zero elsewhere, which leaves every other result unchanged to the bit.

    Args:
        Z: ``(batch x) n x d`` scaled training designs.

    Returns:
        The ``(batch x) 1 x d`` shift.
    """
    mean = Z.mean(-2, keepdim=True)
    extent = Z.amax(-2, keepdim=True) - Z.amin(-2, keepdim=True)
    far = (mean.abs() > 4.0 * extent) & (mean.abs() > 8.0)
    return torch.where(far, mean, torch.zeros_like(mean))


# design_centre per set of a model's cached factors, keyed by the identity of its factor tensor
# (which the model replaces when the data or the hyperparameters change): an acquisition asks
# for the factors at every evaluation, and the shift is the same for all of them.
_CENTRES: dict[int, tuple[weakref.ref[Tensor], Tensor | None]] = {}


def _centre_of(key: Tensor, train_Z: Tensor) -> Tensor | None:
    """:func:`design_centre` of ``train_Z``, or ``None`` where it is zero (nothing to subtract),
    formed once per ``key``."""
    entry = _CENTRES.get(id(key))
    if entry is not None and entry[0]() is key:
        return entry[1]
    centre = design_centre(train_Z)
    for stale in [k for k, (ref, _) in list(_CENTRES.items()) if ref() is None]:
        _CENTRES.pop(stale, None)
    _CENTRES[id(key)] = (weakref.ref(key), centre if bool(centre.any()) else None)
    return _CENTRES[id(key)][1]


def moment_factors(model: PairwiseLaplaceGP) -> MomentFactors:
    """The detached :class:`MomentFactors` of ``model`` at its current hyperparameters.

    Args:
        model: A model for which :func:`supports_rbf_moments` holds.

    Returns:
        The factors (the model's cached Laplace factors, found first if out of date).
    """
    train_X, factors = model.predictive_factors()
    kernel: ScaleKernel = model.covar_module
    batch = model.batch_shape
    ls = kernel.base_kernel.lengthscale.detach()  # (batch x) 1 x d or 1 x 1
    M = factors.M.reshape(*batch, *factors.M.shape[-2:])
    outputscale = kernel.outputscale.detach()  # batch or () (a kernel shared by the members)
    train_Z = train_X / ls
    centre = _centre_of(factors.M, train_Z)
    return MomentFactors(
        train_Z=train_Z if centre is None else train_Z - centre,
        lengthscale=ls,
        outputscale=outputscale.reshape(*outputscale.shape, 1, 1).expand(*batch, 1, 1),
        alpha=factors.alpha.reshape(*batch, -1, 1),
        M_t=M.transpose(-1, -2),
        nu=kernel.base_kernel.nu if isinstance(kernel.base_kernel, MaternKernel) else None,
        constant=prior_constant(model.mean_module).detach(),
        centre=centre,
    )


def moments_from_factors(factors: MomentFactors, X: Tensor) -> RBFMoments:
    """Joint posterior moments at ``X`` (``... x q x d``, the model's batch last in ``...``).

    Unlike the posterior, this accepts ``X`` of another dtype than the model's and computes in
    the wider of the two (torch's type promotion), so the result is as accurate as the narrower
    one allows; :func:`~botorch_pref.optim.optimize_acqf_batched` relies on it for candidates of
    another dtype than the model.

    Args:
        factors: The model's :class:`MomentFactors`.
        X: Designs in the model's input space.

    Returns:
        The :class:`RBFMoments`, with the squared scaled distances ``sq``.
    """
    Xs = factors.train_Z
    if X.shape[-1] != Xs.shape[-1]:
        raise ValueError(f"X has {X.shape[-1]} input dimensions, the model has {Xs.shape[-1]}.")
    Zs = X / factors.lengthscale
    if factors.centre is not None:  # the training designs' shift (design_centre)
        Zs = Zs - factors.centre
    # squared distances between the options and the designs: ... x q x n
    d2 = (
        Zs.square().sum(-1, keepdim=True)
        + Xs.square().sum(-1).unsqueeze(-2)
        - 2.0 * Zs @ Xs.transpose(-1, -2)
    ).clamp_min(0.0)
    K_cross = factors.outputscale * correlation(d2, factors.nu)
    mean = (K_cross @ factors.alpha).squeeze(-1) + factors.constant  # ... x q, as the posterior
    return RBFMoments(Zs, factors.outputscale, mean, K_cross @ factors.M_t, factors.nu, d2)


def rbf_predictive_moments(model: PairwiseLaplaceGP, X: Tensor) -> RBFMoments:
    """Joint posterior moments at ``X`` (``... x q x d``, the model's batch last in ``...``).

    Args:
        model: A model for which :func:`supports_rbf_moments` holds.
        X: Designs in the model's input space.

    Returns:
        The :class:`RBFMoments`.
    """
    return moments_from_factors(moment_factors(model), X)


def pair_moments(factors: MomentFactors, X: Tensor) -> tuple[Tensor, Tensor]:
    r"""Posterior means and difference variance of pairs, with a written-out gradient in ``X``.

    The means :math:`\mu_1, \mu_2` and the variance :math:`t^2` of :math:`g(x_1) - g(x_2)` of
    :func:`moments_from_factors`; their gradient is :func:`pair_moments_vjp`'s formula rather
    than autograd's trace through the moments, which costs less.

    Args:
        factors: The model's :class:`MomentFactors`.
        X: ``... x 2 x d`` pairs in the model's input space (the model's batch last in ``...``).

    Returns:
        ``(mean, var)``: ``... x 2`` posterior means and ``...`` variances of the difference.
    """
    if X.shape[-2] != 2:
        raise ValueError(f"pair_moments needs pairs (... x 2 x d), got shape {tuple(X.shape)}.")
    return _PairMoments.apply(X, factors)


def pair_moments_vjp(
    factors: MomentFactors, moments: RBFMoments, g_mean: Tensor, g_var: Tensor
) -> Tensor:
    r"""The gradient in the pair ``X`` of :math:`\sum \bar\mu \cdot \mu + \sum \bar v\, t^2`.

    With :math:`z = x / \ell`, the cross-covariances :math:`k_i = s\,\rho(\|z_i - \tilde
    z_j\|^2)_j` to the training designs :math:`\tilde z`, :math:`\mu_i = k_i^\top \alpha` and
    :math:`t^2 = 2s - 2s\,\rho(\|z_1 - z_2\|^2) - \|w\|^2` with :math:`w = M(k_1 - k_2)`,
    the gradient in :math:`k_i` is

    .. math::

        G_1 = \bar\mu_1\, \alpha - 2 \bar v\, M^\top w, \qquad
        G_2 = \bar\mu_2\, \alpha + 2 \bar v\, M^\top w,

    and, with the correlation's slope :math:`\rho'` (:func:`correlation_slope`),

    .. math::

        \bar z_i = 2 s \sum_j G_{ij}\, \rho'_{ij}\, (z_i - \tilde z_j)
        \mp 4 \bar v\, s\, \rho'_{12}\, (z_1 - z_2)

    (minus for :math:`z_1`, plus for :math:`z_2`), divided by :math:`\ell` for :math:`x_i`. The
    hyperparameters enter as constants.

    Args:
        factors: The model's :class:`MomentFactors`.
        moments: :func:`moments_from_factors` at the pairs (with ``sq``).
        g_mean: ``... x 2`` incoming gradients :math:`\bar\mu` of the means.
        g_var: ``...`` incoming gradients :math:`\bar v` of the difference variances.

    Returns:
        The ``... x 2 x d`` gradient in the pairs.
    """
    if moments.sq is None:
        raise ValueError("pair_moments_vjp needs the moments of moments_from_factors (with sq).")
    Z, f = moments.Z, factors
    w = (moments.V[..., 0, :] - moments.V[..., 1, :]).unsqueeze(-2) @ f.M_t.transpose(-1, -2)
    spread = 2.0 * g_var[..., None, None] * w  # ... x 1 x n
    G = g_mean.unsqueeze(-1) * f.alpha.transpose(-1, -2) + torch.cat([-spread, spread], -2)
    W = G * f.outputscale * correlation_slope(moments.sq, f.nu)  # ... x 2 x n
    grad_Z = 2.0 * (W.sum(-1, keepdim=True) * Z - W @ f.train_Z)
    dz = Z[..., 0, :] - Z[..., 1, :]
    s = f.outputscale.squeeze(-1)  # (batch x) 1
    slope12 = correlation_slope(dz.square().sum(-1, keepdim=True), f.nu)
    pull = -4.0 * g_var.unsqueeze(-1) * s * slope12 * dz  # through k_12, for z_1
    return (grad_Z + torch.stack([pull, -pull], -2)) / f.lengthscale


class _PairMoments(torch.autograd.Function):
    """:func:`pair_moments` with the gradient of :func:`pair_moments_vjp`."""

    @staticmethod
    def forward(ctx: FunctionCtx, X: Tensor, factors: MomentFactors) -> tuple[Tensor, Tensor]:
        moments = moments_from_factors(factors, X)
        ctx.factors, ctx.moments = factors, moments
        return moments.mean, moments.difference_variance()

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, g_mean: Tensor, g_var: Tensor) -> tuple[Tensor, None]:
        return pair_moments_vjp(ctx.factors, ctx.moments, g_mean, g_var), None
