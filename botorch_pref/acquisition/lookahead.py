r"""One-step lookahead on the recommendation: the expected best compared design after an answer.

The loop recommends the compared design with the highest posterior mean. EUBO asks the pair
whose better option is expected to be best, and it never asks about a design twice, so a run
has often compared a better design than the one it recommends, with posterior means too close
to tell apart. The lookahead asks the pair whose *answer* is expected to raise the
recommendation the most.

Let :math:`g \sim N(\mu, \Sigma)` be the posterior at the pair :math:`x_1, x_2` and at a set
:math:`C` of compared designs (the loop passes those with the highest posterior means), and
let an answer follow :math:`P(x_1 \succ x_2 \mid g) = \Phi((g_1 - g_2) / \sigma)`. With
:math:`D = g_1 - g_2`, :math:`m = \mu_1 - \mu_2`, :math:`v = \operatorname{Var} D`,
:math:`c = \operatorname{Cov}(g, D)` and :math:`\kappa = m / \sqrt{\sigma^2 + v}`,

.. math::

    P(x_1 \succ x_2) = \Phi(\kappa), \qquad
    E[g \mid x_1 \succ x_2] = \mu + c\, \frac{\phi(\kappa)}{\Phi(\kappa) \sqrt{\sigma^2 + v}},
    \qquad
    E[g \mid x_2 \succ x_1] = \mu - c\, \frac{\phi(\kappa)}{\Phi(-\kappa) \sqrt{\sigma^2 + v}}.

These are exact for one probit answer under a Gaussian posterior (the update of assumed-density
filtering; the model's next Laplace fit moves its mode the same way to first order). The value
of the pair is the expected highest posterior mean after the answer,

.. math::

    \alpha(x_1, x_2) = \Phi(\kappa) \max_j E[g_j \mid x_1 \succ x_2]
    + \Phi(-\kappa) \max_j E[g_j \mid x_2 \succ x_1],

the maximum running over the pair and :math:`C`. The two updated means average back to
:math:`\mu` (weights :math:`\Phi(\pm\kappa)`) and the maximum is convex, so
:math:`\alpha \ge \max_j \mu_j`: :math:`\alpha - \max_j \mu_j` is the knowledge gradient of the
in-sample recommendation (Frazier et al., 2009) for one preference answer.
"""

from __future__ import annotations

import math

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.models.likelihoods.pairwise import PairwiseLogitLikelihood, PairwiseProbitLikelihood
from botorch.models.model import Model
from botorch.utils.transforms import t_batch_mode_transform
from torch import Tensor

from botorch_pref.acquisition.champion import MIN_VARIANCE
from botorch_pref.acquisition.moments import (
    MomentFactors,
    RBFMoments,
    correlation,
    moment_factors,
    moments_from_factors,
    supports_rbf_moments,
)
from botorch_pref.likelihoods import PairwiseLogit, PairwiseProbit

__all__ = ["LookaheadBestCompared", "answer_update", "probit_scale"]

#: The probit scale of equal slope at zero as a logistic of scale 1.
_LOGIT_AS_PROBIT = math.sqrt(8.0 / math.pi)


def answer_update(
    mean: Tensor, covariance: Tensor, scale: float
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""Posterior means after one probit answer to the pair of designs ``0`` and ``1``.

    See the module docstring for the formulas.

    Args:
        mean: ``... x n`` posterior means :math:`\mu` (the pair first, ``n >= 2``).
        covariance: ``... x n x n`` joint posterior covariance :math:`\Sigma`.
        scale: The probit scale :math:`\sigma > 0` of an answer,
            :math:`P(x_1 \succ x_2 \mid g) = \Phi((g_1 - g_2) / \sigma)`.

    Returns:
        ``(p_first, p_second, mean_first, mean_second)``: the ``...`` probabilities
        :math:`\Phi(\kappa)` and :math:`\Phi(-\kappa)` that the first design wins and that it
        loses (each from ``log_ndtr``, accurate in either tail), and the ``... x n`` means after
        it wins and after it loses.
    """
    n = mean.shape[-1]
    if n < 2 or covariance.shape[-2:] != (n, n):
        raise ValueError(
            f"need n >= 2 means and an n x n covariance, got {tuple(mean.shape)} and "
            f"{tuple(covariance.shape)}."
        )
    return _update(mean, covariance[..., :, 0] - covariance[..., :, 1], scale)


def _update(mean: Tensor, c: Tensor, scale: float) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """:func:`answer_update` from the covariances ``c`` (``... x n``) of the designs with the
    pair's difference :math:`D = g_0 - g_1` (the pair first)."""
    v = (c[..., 0] - c[..., 1]).clamp_min(MIN_VARIANCE)
    sd = (scale**2 + v).sqrt()
    kappa = (mean[..., 0] - mean[..., 1]) / sd
    log_pdf = -0.5 * kappa.square() - 0.5 * math.log(2.0 * math.pi)
    log_p, log_q = torch.special.log_ndtr(kappa), torch.special.log_ndtr(-kappa)
    up = ((log_pdf - log_p).exp() / sd).unsqueeze(-1)
    down = ((log_pdf - log_q).exp() / sd).unsqueeze(-1)
    return log_p.exp(), log_q.exp(), mean + c * up, mean - c * down


def probit_scale(model: Model) -> float:
    r"""The probit scale :math:`\sigma` of ``model``'s pair answers (see :func:`answer_update`).

    :class:`~botorch_pref.likelihoods.PairwiseProbit` gives its own scale, BoTorch's
    ``PairwiseProbitLikelihood`` :math:`\sqrt 2`. A logit likelihood of scale :math:`s` (ours,
    or BoTorch's with :math:`s = 1`) is matched by the probit of equal slope at zero,
    :math:`\sigma = s \sqrt{8 / \pi}`. A tie threshold is ignored: the lookahead considers the
    two strict answers.

    Args:
        model: A preference model with a pair likelihood.

    Returns:
        :math:`\sigma`.
    """
    likelihood = getattr(model, "likelihood", None)
    if isinstance(likelihood, PairwiseProbit):
        return float(likelihood.scale)
    if isinstance(likelihood, PairwiseLogit):
        return float(likelihood.scale) * _LOGIT_AS_PROBIT
    if isinstance(likelihood, PairwiseProbitLikelihood):
        return math.sqrt(2.0)
    if isinstance(likelihood, PairwiseLogitLikelihood):
        return _LOGIT_AS_PROBIT
    raise ValueError(
        f"no probit scale for a {type(likelihood).__name__} likelihood: pass noise_scale."
    )


class LookaheadBestCompared(AcquisitionFunction):
    r"""The expected highest posterior mean among compared designs after a pair's answer.

    .. math::

        \alpha(x_1, x_2) = \Phi(\kappa) \max_j E[g_j \mid x_1 \succ x_2]
        + \Phi(-\kappa) \max_j E[g_j \mid x_2 \succ x_1],

    the maximum over the pair and the designs ``compared`` (see the module docstring). For a
    :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with a scaled RBF or Matern kernel
    the joint moments come from the model's cached factors
    (:func:`~botorch_pref.acquisition.moments.moments_from_factors`), for other models from
    ``model.posterior``. Gradients flow by autograd. The compared designs' moments are cached
    with the model's factors they came from and formed again once those change (new
    hyperparameters or data): the value always follows the model's current posterior.

    Example:
        >>> mean = model.posterior(model.datapoints.unsqueeze(-2)).mean.reshape(-1)
        >>> acqf = LookaheadBestCompared(model, model.datapoints[mean.topk(8).indices])
        >>> pair, _ = optimize_acqf(acqf, bounds, q=2, num_restarts=4, raw_samples=256)

    Args:
        model: A single-output preference model with a Gaussian posterior.
        compared: ``k x d`` designs the recommendation may move to (``k >= 1``), or
            ``batch_shape x k x d``, one set per member of a batched model.
        noise_scale: The probit scale :math:`\sigma` of an answer; ``None``:
            :func:`probit_scale` of the model.
    """

    def __init__(self, model: Model, compared: Tensor, noise_scale: float | None = None) -> None:
        super().__init__(model=model)
        if not torch.is_tensor(compared) or compared.dim() < 2 or compared.shape[-2] < 1:
            raise ValueError("compared must be a `k x d` or `batch_shape x k x d` tensor, k >= 1.")
        if not bool(torch.isfinite(compared).all()):
            raise ValueError("compared contains NaN or infinite values.")
        scale = probit_scale(model) if noise_scale is None else float(noise_scale)
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"noise_scale must be positive and finite, got {noise_scale!r}.")
        self.compared = compared
        self.noise_scale = scale
        self._factors: MomentFactors | None = None
        self._compared: RBFMoments | None = None
        self._source: object | None = None  # the model's factors the two above came from
        self._fused()

    def compared_pairs(self) -> Tensor:
        r"""Every pair of two of the designs ``compared``: ``(batch_shape x) m x 2 x d``, with
        :math:`m = k(k-1)/2` (none for ``k = 1``), in the order of ``itertools.combinations``.

        The best question is often about two of the leading designs themselves, a point that
        random starting points of an optimiser all but never come near (in six dimensions a
        pair has twelve coordinates): an optimiser of this acquisition should start from these
        pairs as well, as the loop's does.
        """
        k = self.compared.shape[-2]
        i, j = torch.triu_indices(k, k, offset=1, device=self.compared.device)
        return torch.stack([self.compared[..., i, :], self.compared[..., j, :]], dim=-2)

    def _fused(self) -> bool:
        """Whether the moments come from the model's factors; if so, bring the cache up to date.

        The compared designs' moments are the same for any pair, so they are formed once per
        set of the model's factors (identified by the object the model caches them in).
        """
        if not supports_rbf_moments(self.model):
            self._factors = self._compared = self._source = None
            return False
        source = self.model.predictive_factors()[1]
        if source is not self._source:
            self._factors = moment_factors(self.model)
            compared = self.compared.to(self._factors.alpha)
            self._compared = moments_from_factors(self._factors, compared)
            self._source = source
        return True

    @t_batch_mode_transform(expected_q=2)
    def forward(self, X: Tensor) -> Tensor:
        """The value of the pairs ``X`` (``batch_shape x 2 x d``); returns ``batch_shape``."""
        if self._fused():
            mean, c = self._fused_moments(X)
            p, q, first, second = _update(mean, c, self.noise_scale)
        else:
            C = self.compared.to(X).expand(*X.shape[:-2], *self.compared.shape[-2:])
            posterior = self.model.posterior(torch.cat([X, C], dim=-2))
            mean = posterior.mean.squeeze(-1)
            covariance = posterior.distribution.covariance_matrix
            p, q, first, second = answer_update(mean, covariance, self.noise_scale)
        return p * first.amax(-1) + q * second.amax(-1)

    def _fused_moments(self, X: Tensor) -> tuple[Tensor, Tensor]:
        r"""The means of the pair and the compared designs (``... x (2 + k)``) and their
        covariances with :math:`D = g(x_1) - g(x_2)`, from the model's factors.

        With :math:`\Sigma = s\rho - V V^\top`, the compared designs' covariances with
        :math:`D` are :math:`s(\rho(z_c, z_1) - \rho(z_c, z_2)) - V_c (V_1 - V_2)^\top`: only
        the pair's rows are computed per evaluation.
        """
        pair, compared = moments_from_factors(self._factors, X), self._compared
        cov = pair.covariance()
        c_pair = cov[..., :, 0] - cov[..., :, 1]  # ... x 2
        z1, z2 = pair.Z[..., 0:1, :], pair.Z[..., 1:2, :]  # ... x 1 x d
        rho = correlation((compared.Z - z1).square().sum(-1), pair.nu) - correlation(
            (compared.Z - z2).square().sum(-1), pair.nu
        )  # ... x k
        dV = (pair.V[..., 0, :] - pair.V[..., 1, :]).unsqueeze(-1)  # ... x r x 1
        c_compared = pair.outputscale.squeeze(-1) * rho - (compared.V @ dV).squeeze(-1)
        mean = torch.cat([pair.mean, compared.mean.expand(*pair.mean.shape[:-1], -1)], -1)
        return mean, torch.cat([c_pair, c_compared], dim=-1)
