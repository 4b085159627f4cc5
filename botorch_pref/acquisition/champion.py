r"""Champion-challenger acquisition: expected improvement over a compared design, jointly.

In preferential BO every answer compares designs, so a natural query pairs the current
*champion* :math:`c` (the compared design with the highest posterior mean) with a *challenger*
:math:`x` that is expected to beat it by the most:

.. math::

    \alpha(x) = E\big[(g(x) - g(c))^+\big], \qquad
    \begin{pmatrix} g(x) \\ g(c) \end{pmatrix} \sim
    N\left(\begin{pmatrix} \mu(x) \\ \mu(c) \end{pmatrix},
    \begin{pmatrix} v(x) & k(x, c) \\ k(x, c) & v(c) \end{pmatrix}\right).

The difference :math:`g(x) - g(c)` is Gaussian with mean :math:`\Delta = \mu(x) - \mu(c)` and
variance :math:`t^2 = v(x) + v(c) - 2 k(x, c)`, so

.. math::

    \alpha(x) = \Delta\, \Phi(\Delta / t) + t\, \phi(\Delta / t) = t\, h(\Delta / t),
    \qquad h(u) = \phi(u) + u \Phi(u).

Since :math:`E[\max(a, b)] = E[b] + E[(a - b)^+]`, this is
:math:`\mathrm{EUBO}(x, c) - \mu(c)`: for a fixed champion, champion-challenger and EUBO choose
the same challenger. The joint variance matters: near the champion :math:`t \to 0` (a design is
never expected to beat itself), whereas Brochu et al.'s (2010) *marginal* variant, the expected
improvement of :math:`g(x)` over the number :math:`\mu(c)` with variance :math:`v(x)` alone,
keeps rewarding points next to the champion whose level is uncertain (available as
``variant="marginal"``).

:math:`t\,h(\Delta/t)` is evaluated as :math:`\exp(\log h(u) + \log t)`
(:func:`~botorch_pref.acquisition.improvement.log_expected_improvement`, the LogEI paper's
stable form), so the value keeps full relative accuracy (and a non-zero gradient)
far into the tail :math:`u \ll 0`, where :math:`\phi(u) + u\Phi(u)` cancels catastrophically.
``log=True`` returns :math:`\log \alpha(x)` itself, which is what a gradient-based optimiser
should climb once most of the space is unlikely to improve.
"""

from __future__ import annotations

import torch
from botorch.acquisition.analytic import AnalyticAcquisitionFunction
from botorch.acquisition.objective import PosteriorTransform
from botorch.models.model import Model
from botorch.utils.transforms import t_batch_mode_transform
from torch import Tensor

from botorch_pref.acquisition.improvement import log_expected_improvement
from botorch_pref.acquisition.moments import (
    moment_factors,
    moments_from_factors,
    pair_moments,
    supports_rbf_moments,
)

__all__ = ["ChampionChallenger", "champion", "champion_index"]

#: Variance floor of a difference of two utilities, :math:`g(x) - g(c)` here (and of :math:`g(x)`
#: in the marginal variant), a pair's in EUBO and in the lookahead.
MIN_VARIANCE = 1e-12


def _compared_designs(model: Model) -> Tensor:
    """The model's ``n x d`` datapoints (an unbatched preference model is required)."""
    X = getattr(model, "datapoints", None)
    if X is None:
        raise ValueError("The model has no datapoints: the champion needs at least one answer.")
    if X.dim() != 2:
        raise ValueError(
            f"champion needs an unbatched model (datapoints n x d), got {tuple(X.shape)}."
        )
    return X


def champion_index(model: Model) -> int:
    r"""Index of the compared design with the highest posterior mean.

    .. math::

        i^* = \arg\max_i \mu(x_i), \quad x_i \in \text{model.datapoints}.

    Args:
        model: An unbatched preference model with ``datapoints`` (``n x d``), e.g.
            :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` or BoTorch's ``PairwiseGP``.

    Returns:
        The row index of the champion in ``model.datapoints``.
    """
    X = _compared_designs(model)
    with torch.no_grad():
        mean = model.posterior(X.unsqueeze(-2)).mean.reshape(-1)
    return int(mean.argmax())


def champion(model: Model) -> Tensor:
    r"""The compared design with the highest posterior mean, as a ``1 x d`` tensor.

    Args:
        model: An unbatched preference model with ``datapoints`` (``n x d``).

    Returns:
        ``model.datapoints[i*]`` with shape ``1 x d`` (see :func:`champion_index`).
    """
    X = _compared_designs(model)
    return X[champion_index(model)].unsqueeze(0).clone()


class ChampionChallenger(AnalyticAcquisitionFunction):
    r"""Expected improvement of a challenger over a fixed champion under the joint posterior.

    .. math::

        \alpha(x) = E[(g(x) - g(c))^+] = t\,h(\Delta/t), \quad \Delta = \mu(x) - \mu(c),
        \quad t^2 = v(x) + v(c) - 2 k(x, c),

    with :math:`h(u) = \phi(u) + u\Phi(u)` and :math:`t^2` floored at ``MIN_VARIANCE``. With
    ``variant="marginal"`` (Brochu et al., 2010) :math:`t^2 = v(x)`: the expected improvement
    of :math:`g(x)` over the number :math:`\mu(c)`.

    Example:
        >>> c = champion(model)
        >>> acqf = ChampionChallenger(model, champion=c)
        >>> x, _ = optimize_acqf(acqf, bounds, q=1, num_restarts=4, raw_samples=128)

    Args:
        model: A single-output preference model whose posterior is Gaussian (e.g.
            :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP`, ``PairwiseGP``).
        champion: The champion :math:`c`, a ``d`` or ``1 x d`` tensor in the model's input
            space, or a ``batch_shape x d`` tensor with one champion per member of a batched
            model.
        variant: ``"joint"`` (the default) or ``"marginal"``.
        log: Return :math:`\log \alpha(x)` instead of :math:`\alpha(x)`.
        posterior_transform: An optional BoTorch posterior transform.
    """

    def __init__(
        self,
        model: Model,
        champion: Tensor,
        variant: str = "joint",
        log: bool = False,
        posterior_transform: PosteriorTransform | None = None,
    ) -> None:
        super().__init__(model=model, posterior_transform=posterior_transform)
        if variant not in ("joint", "marginal"):
            raise ValueError(f"variant must be 'joint' or 'marginal', got {variant!r}.")
        if not torch.is_tensor(champion) or champion.dim() < 1:
            raise ValueError("champion must be a `d`, `1 x d` or `batch_shape x d` tensor.")
        lead = tuple(champion.shape[:-1])
        if lead not in ((), (1,)):
            try:
                batch = tuple(model.batch_shape)
            except NotImplementedError:
                batch = ()
        else:
            batch = lead
        if lead not in ((), (1,), batch):
            raise ValueError(
                f"champion must be a single design or one per model batch member "
                f"(batch shape {batch}), got shape {tuple(champion.shape)}."
            )
        if not bool(torch.isfinite(champion).all()):
            raise ValueError("champion contains NaN or infinite values.")
        if champion.dim() == 1 or tuple(champion.shape[:-1]) == (1,):
            champion = champion.reshape(1, -1)
        else:  # one champion per batch member: batch_shape x 1 x d
            champion = champion.unsqueeze(-2)
        self.register_buffer("champion", champion.detach().clone())
        self.variant = variant
        self._log = bool(log)

    def _difference_moments(self, X: Tensor) -> tuple[Tensor, Tensor]:
        r"""Mean :math:`\Delta` and standard deviation :math:`t` of the improvement's Gaussian.

        Args:
            X: A ``batch_shape x 1 x d`` tensor of challengers.

        Returns:
            Two ``batch_shape`` tensors.
        """
        if X.shape[-1] != self.champion.shape[-1]:
            raise ValueError(
                f"X has {X.shape[-1]} input dimensions, the champion has {self.champion.shape[-1]}."
            )
        c = self.champion.to(X).expand(*X.shape[:-2], 1, X.shape[-1])
        pair = torch.cat([X, c], dim=-2)
        if self.posterior_transform is None and supports_rbf_moments(self.model):
            # the same moments from the model's cached factors (see LaplaceEUBO)
            factors = moment_factors(self.model)
            if self.variant == "joint":
                mean, var = pair_moments(factors, pair)
            else:
                moments = moments_from_factors(factors, pair)
                mean, var = moments.mean, moments.variance(0)
            return mean[..., 0] - mean[..., 1], var.clamp_min(MIN_VARIANCE).sqrt()
        posterior = self.model.posterior(pair, posterior_transform=self.posterior_transform)
        mean = posterior.mean.squeeze(-1)
        cov = posterior.distribution.covariance_matrix
        delta = mean[..., 0] - mean[..., 1]
        if self.variant == "joint":
            var = cov[..., 0, 0] + cov[..., 1, 1] - 2.0 * cov[..., 0, 1]
        else:
            var = cov[..., 0, 0]
        return delta, var.clamp_min(MIN_VARIANCE).sqrt()

    @t_batch_mode_transform(expected_q=1)
    def forward(self, X: Tensor) -> Tensor:
        r"""Evaluate the acquisition value (or its log) at challengers ``X``.

        Args:
            X: A ``batch_shape x 1 x d`` tensor of challengers.

        Returns:
            A ``batch_shape`` tensor of :math:`\alpha(x)` (or :math:`\log\alpha(x)` if ``log``).
        """
        delta, t = self._difference_moments(X)
        log_value = log_expected_improvement(delta, t)
        return log_value if self._log else log_value.exp()
