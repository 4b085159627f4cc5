r"""Pairwise links: probit (Thurstone-Mosteller) and logit (Bradley-Terry), with optional ties.

:class:`PairwiseProbit`: :math:`P(v \succ u) = \Phi(\delta / s)`, independent
:math:`N(0, \sigma^2)` noise on each option's utility, :math:`s = \sqrt 2 \sigma`. Its log
likelihood's derivatives use the inverse Mills ratio :math:`\lambda(z) = \phi(z)/\Phi(z)`
(:func:`probit_hazard`, computed without clamping ``z``):

.. math::

    \frac{d}{d\delta} \log\Phi(\delta/s) = \lambda(z)/s, \qquad
    -\frac{d^2}{d\delta^2} \log\Phi(\delta/s) = \lambda(z)(z + \lambda(z))/s^2,
    \qquad z = \delta / s.

:class:`PairwiseLogit`: :math:`P(v \succ u) = \operatorname{sigmoid}(\delta / s)`, independent
Gumbel noise of scale :math:`s`; derivatives :math:`\sigma(-z)/s` and
:math:`\sigma(z)\sigma(-z)/s^2`. Both log-CDFs are concave, so the curvature is positive.

Scale convention: BoTorch's :class:`~botorch.models.PairwiseGP` fixes the probit noise at one,
so that :math:`P = \Phi(\delta / \sqrt 2)`, and lets the kernel's outputscale absorb the noise
level. :class:`PairwiseProbit` keeps that default (``noise_std=1``), and :class:`PairwiseLogit`
defaults to BoTorch's :math:`P = \operatorname{sigmoid}(\delta)`.
"""

from __future__ import annotations

import math
from typing import Unpack

import torch
from torch import Tensor

from botorch_pref.likelihoods.base import AnswerThresholds, PairwiseLikelihood, positive_float

__all__ = ["PairwiseLogit", "PairwiseProbit", "probit_hazard"]


def _log1mexp(x: Tensor) -> Tensor:
    r""":math:`\log(1 - e^x)` for :math:`x < 0`, accurate on both sides of :math:`-\log 2`."""
    return torch.where(
        x > -math.log(2.0),
        torch.log(-torch.expm1(x.clamp_max(-1e-300 if x.dtype == torch.float64 else -1e-38))),
        torch.log1p(-torch.exp(x.clamp_max(-math.log(2.0)))),
    )


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
# Below -threshold the asymptotic series for z + lambda(z) replaces the difference of two large
# numbers; the series' first omitted term, 8162 x^-11, is below 1e-7 relative at x = 10 and
# 1e-11 at x = 30, and the direct difference loses about eps * x / (z + lambda) ~ eps * x^2.
_SERIES_THRESHOLD = {torch.float64: 30.0, torch.float32: 10.0}
# Below -threshold (in a = (theta - |delta|) / s) PairwiseProbit.tie_derivatives takes the
# tie's slope and curvature from probit_hazard: the generic formula's exp(log phi - log D)
# loses eps * a^2 / 2 and its curvature cancels like z + lambda (1e-6 relative at a = -300 in
# float64, 2e-4 at a = -10 and a wrong sign at a = -300 in float32).
_TIE_TAIL_THRESHOLD = {torch.float64: 100.0, torch.float32: 10.0}


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


class PairwiseProbit(PairwiseLikelihood):
    r"""Thurstone-Mosteller (probit) likelihood :math:`P(v \succ u) = \Phi(\delta / s)`.

    Each option's perceived utility carries independent :math:`N(0, \sigma^2)` noise, so the
    difference has standard deviation :math:`s = \sqrt 2 \sigma` (Chu & Ghahramani 2005). The
    default :math:`\sigma = 1` is BoTorch's convention: the kernel's outputscale measures the
    utility in units of the noise.

    With a ``tie_threshold`` :math:`\theta` the model is ordinal: the person reports "no
    preference" when the perceived difference lies within :math:`\pm\theta`, so
    :math:`P(\text{tie}) = \Phi((\theta - \delta)/s) - \Phi((-\theta - \delta)/s)` and
    :math:`P(v \succ u) = \Phi((\delta - \theta)/s)`. :math:`\theta` (utility units) is a
    hyperparameter fitted by the Laplace evidence; without a threshold nothing changes.

    Args:
        noise_std: The per-option noise standard deviation :math:`\sigma > 0`.
        **answers: Ties, graded comparisons and ratings, keyword only: ``tie_threshold``
            (``None``, the default, for none), its prior and constraint, ``graded_levels`` and
            ``rating_levels`` (:class:`~botorch_pref.likelihoods.base.AnswerThresholds`).
    """

    def __init__(self, noise_std: float = 1.0, **answers: Unpack[AnswerThresholds]) -> None:
        noise_std = positive_float(noise_std, "noise_std")
        super().__init__(**answers)
        self._noise_std = noise_std

    @property
    def noise_std(self) -> float:
        r"""The per-option noise standard deviation :math:`\sigma` (a plain float, not a
        parameter); setting it checks the value as the constructor does.

        Raises:
            ValueError: On setting a value that is not positive and finite.
        """
        return self._noise_std

    @noise_std.setter
    def noise_std(self, value: float) -> None:
        self._noise_std = positive_float(value, "noise_std")

    def __setstate__(self, state: dict) -> None:
        # objects pickled before noise_std was a property hold it under its public name
        if "noise_std" in state:
            state["_noise_std"] = state.pop("noise_std")
        super().__setstate__(state)

    @property
    def scale(self) -> float:
        return math.sqrt(2.0) * self._noise_std

    def log_prob(self, delta: Tensor) -> Tensor:
        return torch.special.log_ndtr(self._shift(delta) / self.scale)

    def derivatives(
        self, delta: Tensor, scale: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        s = self.scale if scale is None else scale
        z = self._shift(delta) / s
        lam, z_plus_lam = probit_hazard(z)
        return torch.special.log_ndtr(z), lam / s, lam * z_plus_lam / (s * s)

    def predictive_probability(self, mean: Tensor, var: Tensor) -> Tensor:
        return torch.special.ndtr(self._shift(mean) / torch.sqrt(self.scale**2 + var.clamp_min(0)))

    def _log_pdf(self, x: Tensor) -> Tensor:
        return -0.5 * x * x - 0.5 * math.log(2.0 * math.pi)

    def _pdf_score(self, x: Tensor) -> Tensor:
        return -x

    def _log_interval(self, a: Tensor, b: Tensor) -> Tensor:
        log_a = torch.special.log_ndtr(a)
        return log_a + _log1mexp(torch.special.log_ndtr(b) - log_a)

    def _link_terms(self, z: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        lam, z_plus_lam = probit_hazard(z)
        return torch.special.log_ndtr(z), lam, lam * z_plus_lam

    def _interval_terms(self, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        r"""As the generic form, with :meth:`tie_derivatives`' ratio form in the far tail.

        With :math:`\lambda_a = \lambda(a)`, :math:`\lambda_b = \lambda(b)`,
        :math:`r = \Phi(b)/\Phi(a) = (\lambda_a/\lambda_b)\,e^{(a-b)(a+b)/2}` and
        :math:`u = 1/(1-r)`: :math:`r_a - r_b = \lambda_b + u(\lambda_a - \lambda_b)` and the
        curvature :math:`u(\lambda_a(a+\lambda_a) - r\lambda_b(b+\lambda_b)) +
        u^2 r (\lambda_a - \lambda_b)^2`, where :math:`a < -100` (float64; -10 otherwise).
        """
        log_d, dr, curv = super()._interval_terms(a, b)
        far = a < -_TIE_TAIL_THRESHOLD.get(a.dtype, 10.0)
        if not bool(far.any()):  # the common case: skip the ratio form's work
            return log_d, dr, curv
        lam_a, zl_a = probit_hazard(a)
        lam_b, zl_b = probit_hazard(b)
        log_r = torch.log(lam_a / lam_b) + 0.5 * (a - b) * (a + b)
        r = torch.exp(log_r)
        u = -1.0 / torch.expm1(log_r)
        lam_diff = (zl_a - zl_b) - (a - b)  # lambda_a - lambda_b without cancelling
        tail_dr = lam_b + u * lam_diff
        tail_curv = u * (lam_a * zl_a - r * lam_b * zl_b) + u * u * r * lam_diff**2
        return log_d, torch.where(far, tail_dr, dr), torch.where(far, tail_curv.clamp_min(0), curv)

    def tie_derivatives(
        self, delta: Tensor, scale: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        r"""Log-probability of a tie and its first and negative second derivatives in ``delta``.

        As :meth:`PairwiseLikelihood.tie_derivatives`; far in the tail (:math:`a < -100` in
        float64, :math:`a < -10` otherwise) the ratios come from :func:`probit_hazard`:
        with :math:`\lambda_a = \lambda(a)`, :math:`\lambda_b = \lambda(b)`,
        :math:`r = \Phi(b)/\Phi(a) = (\lambda_a/\lambda_b)\, e^{-2\theta|\delta|/s^2}` and
        :math:`u = 1/(1 - r)`, :math:`r_a = u\lambda_a`, :math:`r_b = u r \lambda_b` and

        .. math::

            -s^2 \frac{d^2 \log D}{d\delta^2} = u\,(\lambda_a (a + \lambda_a)
            - r \lambda_b (b + \lambda_b)) + u^2 r (\lambda_a - \lambda_b)^2,

        free of the cancellation of the general formula (whose curvature tends to the pair's
        :math:`1/s^2` as the difference of two terms of order :math:`a^2`).

        Args:
            delta: Utility differences, any shape.
            scale: Another scale in place of :attr:`scale`, or ``None`` (see
                :meth:`PairwiseLikelihood.derivatives`).

        Returns:
            ``(log_p, grad, neg_hess)`` shaped like ``delta``.
        """
        log_d, grad, neg_hess = super().tie_derivatives(delta, scale)
        s = self.scale if scale is None else scale
        theta = self._theta(delta)
        x = delta.abs()
        a = (theta - x) / s
        b = (-theta - x) / s
        lam_a, zl_a = probit_hazard(a)
        lam_b, zl_b = probit_hazard(b)
        log_r = torch.log(lam_a / lam_b) - 2.0 * theta * x / (s * s)
        r = torch.exp(log_r)
        u = -1.0 / torch.expm1(log_r)
        # lambda_a - lambda_b = (b - a) + (z + lambda)(a) - (z + lambda)(b), without cancelling
        lam_diff = (zl_a - zl_b) - 2.0 * theta / s
        sign = torch.where(delta < 0, -1.0, 1.0).to(delta)
        tail_grad = -sign * (lam_b + u * lam_diff) / s  # r_a - r_b = lambda_b + u lam_diff
        tail_hess = (u * (lam_a * zl_a - r * lam_b * zl_b) + u * u * r * lam_diff**2) / (s * s)
        far = a < -_TIE_TAIL_THRESHOLD.get(delta.dtype, 10.0)
        grad = torch.where(far, tail_grad, grad)
        neg_hess = torch.where(far, tail_hess.clamp_min(0.0), neg_hess)
        return log_d, grad, neg_hess


# Rules for E[sigmoid(X / s)], X ~ N(m, v) (see PairwiseLogit.predictive_probability): 40-node
# Gauss-Hermite in X (probabilists' weights, normalised) where sd(X) <= s, and the trapezoid
# rule of step s / 2 on [-40 s, 40 s] in the logistic variable L where sd(X) > s.
_GH_ORDER = 40
_TRAPEZOID_HALF_WIDTH = 40.0
_TRAPEZOID_STEP = 0.5


def _expectation_rules(dtype: torch.dtype, device: torch.device) -> tuple[Tensor, ...]:
    """Gauss-Hermite nodes and weights, then the logistic trapezoid's (in units of ``s``)."""
    import numpy as np  # off the hot path: computed once per dtype and device

    nodes, weights = np.polynomial.hermite_e.hermegauss(_GH_ORDER)
    n = round(_TRAPEZOID_HALF_WIDTH / _TRAPEZOID_STEP)
    grid = np.arange(-n, n + 1) * _TRAPEZOID_STEP
    density = 1.0 / (2.0 + 2.0 * np.cosh(grid))  # the logistic density, sigmoid(l) sigmoid(-l)
    rules = (nodes, weights / weights.sum(), grid, density / density.sum())
    return tuple(torch.as_tensor(r, dtype=dtype, device=device) for r in rules)


class PairwiseLogit(PairwiseLikelihood):
    r"""Bradley-Terry (logit) likelihood :math:`P(v \succ u) = \operatorname{sigmoid}(\delta / s)`.

    Equivalent to independent Gumbel noise of scale :math:`s` on each option's utility. The
    default :math:`s = 1` matches BoTorch's :class:`~botorch.models.likelihoods.pairwise.
    PairwiseLogitLikelihood`.

    With a ``tie_threshold`` :math:`\theta` the model is the ordinal logit:
    :math:`P(\text{tie}) = \sigma((\theta - \delta)/s) - \sigma((-\theta - \delta)/s)` and
    :math:`P(v \succ u) = \sigma((\delta - \theta)/s)` (Rao-Kupper style), see
    :class:`PairwiseProbit`.

    Args:
        scale: The logistic scale :math:`s > 0`.
        **answers: Ties, graded comparisons and ratings, keyword only: ``tie_threshold``
            (``None``, the default, for none), its prior and constraint, ``graded_levels`` and
            ``rating_levels`` (:class:`~botorch_pref.likelihoods.base.AnswerThresholds`).
    """

    def __init__(self, scale: float = 1.0, **answers: Unpack[AnswerThresholds]) -> None:
        scale = positive_float(scale, "scale")
        super().__init__(**answers)
        self._scale = scale

    @property
    def scale(self) -> float:
        return self._scale

    def log_prob(self, delta: Tensor) -> Tensor:
        return torch.nn.functional.logsigmoid(self._shift(delta) / self._scale)

    def derivatives(
        self, delta: Tensor, scale: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        s = self._scale if scale is None else scale
        z = self._shift(delta) / s
        p_lose = torch.sigmoid(-z)
        return (
            torch.nn.functional.logsigmoid(z),
            p_lose / s,
            torch.sigmoid(z) * p_lose / (s * s),
        )

    def predictive_probability(self, mean: Tensor, var: Tensor) -> Tensor:
        r""":math:`E[\operatorname{sigmoid}(X / s)]` for :math:`X \sim N(m, v)`.

        With :math:`L` a logistic variable of scale :math:`s` independent of :math:`X`,
        :math:`\operatorname{sigmoid}(x / s) = P(L < x)`, so the expectation is also
        :math:`E_L[\Phi((m - L) / \sqrt v)]`. Each form is integrated over its narrower
        variable, where the other factor is smooth: Gauss-Hermite (40 nodes) over :math:`X`
        when :math:`\sqrt v \le s`, the trapezoid rule (step :math:`s / 2` on
        :math:`\pm 40 s`, exponentially accurate for the analytic logistic density) over
        :math:`L` otherwise. Both are accurate to about 1e-14 in float64 for every
        :math:`m` and :math:`v`; one rule over :math:`X` alone misses the sigmoid's step when
        :math:`\sqrt v \gg s` (an error of 0.05 at :math:`\sqrt v = 30 s`).
        """
        key = (mean.dtype, mean.device)
        # {(dtype, device): rules}, made on first use (and absent from objects pickled earlier)
        rules = self.__dict__.setdefault("_rules", {})
        if key not in rules:
            rules[key] = _expectation_rules(*key)
        nodes, weights, grid, density = rules[key]
        s, mean = self._scale, self._shift(mean)
        sd = var.clamp_min(0).sqrt()
        narrow = torch.sigmoid((mean.unsqueeze(-1) + sd.unsqueeze(-1) * nodes) / s)
        wide_sd = sd.clamp_min(s).unsqueeze(-1)
        wide = torch.special.ndtr((mean.unsqueeze(-1) - s * grid) / wide_sd)
        return torch.where(sd <= s, (narrow * weights).sum(-1), (wide * density).sum(-1))

    def _log_pdf(self, x: Tensor) -> Tensor:
        return torch.nn.functional.logsigmoid(x) + torch.nn.functional.logsigmoid(-x)

    def _pdf_score(self, x: Tensor) -> Tensor:
        return -torch.tanh(0.5 * x)

    def _link_terms(self, z: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        p_lose = torch.sigmoid(-z)
        return torch.nn.functional.logsigmoid(z), p_lose, torch.sigmoid(z) * p_lose

    def _log_interval(self, a: Tensor, b: Tensor) -> Tensor:
        # sigmoid(a) - sigmoid(b) = sigmoid(a) sigmoid(-b) (1 - exp(b - a)), exact for a > b
        logsig = torch.nn.functional.logsigmoid
        return logsig(a) + logsig(-b) + _log1mexp(b - a)
