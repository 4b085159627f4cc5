r"""Likelihoods for pairwise preference data.

A comparison row ``(v, u)`` says that design ``v`` beat design ``u``. Every likelihood here is a
function of the utility difference :math:`\delta = f_v - f_u` alone:

.. math::

    P(v \succ u \mid f) = \sigma(\delta / s)

with :math:`\sigma` the standard normal CDF :math:`\Phi` (:class:`PairwiseProbit`, Thurstone's
model) or the logistic function (:class:`PairwiseLogit`, Bradley-Terry). The Laplace engine in
:mod:`botorch_pref.inference.laplace` needs three things of a likelihood at a vector of
differences: the log-probability, its first derivative, and its negative second derivative, which
is positive for both links (their log-CDFs are concave). :meth:`PairwiseLikelihood.derivatives`
returns all three at once.

Scale convention: BoTorch's :class:`~botorch.models.PairwiseGP` fixes the probit noise at one, so
that :math:`P = \Phi(\delta / \sqrt 2)`, and lets the kernel's outputscale absorb the noise level.
:class:`PairwiseProbit` keeps that default (``noise_std=1`` gives :math:`s = \sqrt 2 \cdot 1`), and
:class:`PairwiseLogit` defaults to BoTorch's :math:`P = \operatorname{sigmoid}(\delta)`.
"""

from __future__ import annotations

import math

import torch
from gpytorch.likelihoods import Likelihood
from torch import Tensor
from torch.distributions import Bernoulli

__all__ = [
    "PairwiseLikelihood",
    "PairwiseLogit",
    "PairwiseProbit",
    "probit_hazard",
]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
# Below -threshold the asymptotic series for z + lambda(z) replaces the difference of two large
# numbers; the series' first omitted term, 8162 x^-11, is below 1e-7 relative at x = 10 and
# 1e-11 at x = 30, and the direct difference loses about eps * x / (z + lambda) ~ eps * x^2.
_SERIES_THRESHOLD = {torch.float64: 30.0, torch.float32: 10.0}


def probit_hazard(z: Tensor) -> tuple[Tensor, Tensor]:
    r"""Inverse Mills ratio of the standard normal and its curvature factor, without clamping.

    Computes :math:`\lambda(z) = \phi(z) / \Phi(z)` as :math:`\exp(\log\phi(z) - \log\Phi(z))`
    for :math:`z \ge 0` and as :math:`\sqrt{2/\pi} / \operatorname{erfcx}(-z/\sqrt 2)` for
    :math:`z < 0`, where the logarithms would cancel (their difference loses
    :math:`\epsilon z^2/2` in float32), and :math:`z + \lambda(z) \in (0, \infty)`, which
    multiplies :math:`\lambda` in the negative second derivative of :math:`\log\Phi`:

    .. math::

        -\frac{d^2}{dz^2}\log\Phi(z) = \lambda(z)\,(z + \lambda(z)).

    For :math:`z \ll 0`, :math:`\lambda(z) \approx -z` and the sum cancels catastrophically; there
    the asymptotic series :math:`z + \lambda = x^{-1} - 2x^{-3} + 10x^{-5} - 74x^{-7} + 706x^{-9}`
    with :math:`x = -z` is used instead, so the curvature stays positive and accurate in float32.

    Args:
        z: A floating tensor of standardised differences, any shape.

    Returns:
        A tuple ``(lam, z_plus_lam)`` of tensors shaped like ``z``.
    """
    threshold = _SERIES_THRESHOLD.get(z.dtype, 10.0)
    negative = z < 0
    log_phi = -0.5 * z * z - 0.5 * math.log(2.0 * math.pi)
    lam_pos = torch.exp(log_phi - torch.special.log_ndtr(z))
    lam_neg = _SQRT_2_OVER_PI / torch.special.erfcx(-z.clamp_max(0) / math.sqrt(2.0))
    lam = torch.where(negative, lam_neg, lam_pos)
    x = (-z).clamp_min(threshold)  # only used where z < -threshold
    ix2 = 1.0 / (x * x)
    series = (1.0 + ix2 * (-2.0 + ix2 * (10.0 + ix2 * (-74.0 + ix2 * 706.0)))) / x
    z_plus_lam = torch.where(z < -threshold, series, z + lam)
    return lam, z_plus_lam


class PairwiseLikelihood(Likelihood):
    r"""Base class: a link :math:`P(v \succ u) = \sigma(\delta / s)` of the utility difference.

    Subclasses implement :meth:`derivatives` and :meth:`log_prob`; the predictive probability
    under a Gaussian belief about :math:`\delta` is :meth:`predictive_probability`.
    """

    def __init__(self) -> None:
        super().__init__(max_plate_nesting=1)

    @property
    def scale(self) -> float:
        """The scale :math:`s` that divides the utility difference."""
        raise NotImplementedError

    def log_prob(self, delta: Tensor) -> Tensor:
        r"""Log-probability :math:`\log P(v \succ u)` for utility differences ``delta``."""
        raise NotImplementedError

    def derivatives(self, delta: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        r"""Log-probability and its first and negative second derivatives in ``delta``.

        Args:
            delta: Utility differences :math:`f_v - f_u`, any shape.

        Returns:
            ``(log_p, grad, neg_hess)``, each shaped like ``delta``, with ``neg_hess > 0``.
        """
        raise NotImplementedError

    def predictive_probability(self, mean: Tensor, var: Tensor) -> Tensor:
        r"""Probability that ``v`` beats ``u`` when :math:`\delta \sim N(\text{mean}, \text{var})`.

        Args:
            mean: Mean of the utility difference.
            var: Variance of the utility difference (non-negative), broadcastable to ``mean``.

        Returns:
            :math:`E[\sigma(\delta / s)]`, shaped like ``mean``.
        """
        raise NotImplementedError

    def forward(self, delta: Tensor) -> Bernoulli:  # type: ignore[override]
        """The Bernoulli distribution of the answer "v beat u" given differences ``delta``."""
        return Bernoulli(logits=self.log_prob(delta) - self.log_prob(-delta))


class PairwiseProbit(PairwiseLikelihood):
    r"""Thurstone-Mosteller (probit) likelihood :math:`P(v \succ u) = \Phi(\delta / s)`.

    Each option's perceived utility carries independent :math:`N(0, \sigma^2)` noise, so the
    difference has standard deviation :math:`s = \sqrt 2 \sigma` (Chu & Ghahramani 2005). The
    default :math:`\sigma = 1` is BoTorch's convention: the kernel's outputscale measures the
    utility in units of the noise.

    Args:
        noise_std: The per-option noise standard deviation :math:`\sigma > 0`.
    """

    def __init__(self, noise_std: float = 1.0) -> None:
        super().__init__()
        noise_std = float(noise_std)
        if not math.isfinite(noise_std) or noise_std <= 0:
            raise ValueError(f"noise_std must be a positive finite number, got {noise_std}.")
        self.noise_std = noise_std

    @property
    def scale(self) -> float:
        return math.sqrt(2.0) * self.noise_std

    def log_prob(self, delta: Tensor) -> Tensor:
        return torch.special.log_ndtr(delta / self.scale)

    def derivatives(self, delta: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        s = self.scale
        z = delta / s
        lam, z_plus_lam = probit_hazard(z)
        return torch.special.log_ndtr(z), lam / s, lam * z_plus_lam / (s * s)

    def predictive_probability(self, mean: Tensor, var: Tensor) -> Tensor:
        return torch.special.ndtr(mean / torch.sqrt(self.scale**2 + var.clamp_min(0)))


# Gauss-Hermite rule for E[sigmoid] under a Gaussian (probabilists' weights, normalised).
_GH_ORDER = 40


def _gauss_hermite(dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    import numpy as np  # off the hot path: 40 nodes, computed once per call site

    nodes, weights = np.polynomial.hermite_e.hermegauss(_GH_ORDER)
    weights = weights / weights.sum()
    return (
        torch.as_tensor(nodes, dtype=dtype, device=device),
        torch.as_tensor(weights, dtype=dtype, device=device),
    )


class PairwiseLogit(PairwiseLikelihood):
    r"""Bradley-Terry (logit) likelihood :math:`P(v \succ u) = \operatorname{sigmoid}(\delta / s)`.

    Equivalent to independent Gumbel noise of scale :math:`s` on each option's utility. The
    default :math:`s = 1` matches BoTorch's :class:`~botorch.models.likelihoods.pairwise.
    PairwiseLogitLikelihood`.

    Args:
        scale: The logistic scale :math:`s > 0`.
    """

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        scale = float(scale)
        if not math.isfinite(scale) or scale <= 0:
            raise ValueError(f"scale must be a positive finite number, got {scale}.")
        self._scale = scale
        self._gh_cache: dict[tuple[torch.dtype, torch.device], tuple[Tensor, Tensor]] = {}

    @property
    def scale(self) -> float:
        return self._scale

    def log_prob(self, delta: Tensor) -> Tensor:
        return torch.nn.functional.logsigmoid(delta / self._scale)

    def derivatives(self, delta: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        s = self._scale
        z = delta / s
        p_lose = torch.sigmoid(-z)
        return (
            torch.nn.functional.logsigmoid(z),
            p_lose / s,
            torch.sigmoid(z) * p_lose / (s * s),
        )

    def predictive_probability(self, mean: Tensor, var: Tensor) -> Tensor:
        key = (mean.dtype, mean.device)
        if key not in self._gh_cache:
            self._gh_cache[key] = _gauss_hermite(*key)
        nodes, weights = self._gh_cache[key]
        sd = var.clamp_min(0).sqrt().unsqueeze(-1)
        return (torch.sigmoid((mean.unsqueeze(-1) + sd * nodes) / self._scale) * weights).sum(-1)
