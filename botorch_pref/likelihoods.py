r"""Likelihoods for preference data: pairs, choices among q options, rankings and ties.

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

Beyond pairs (:class:`ObservationKind`), an observation over a set of designs
:math:`S = (o_0, \dots, o_{q-1})`, listed best first, is written in difference coordinates
:math:`\delta_j = f(o_0) - f(o_j)`, :math:`j = 1, \dots, q-1`, and
:meth:`PairwiseLikelihood.observation_derivatives` returns its log-probability, the gradient
:math:`h` in :math:`\delta` and the negative Hessian block :math:`\hat H` (``(q-1) x (q-1)``,
positive semi-definite) that the general Laplace engine
(:mod:`botorch_pref.inference.observations`) assembles into :math:`W`:

* :class:`Choice` (multinomial logit): the person picks :math:`o_0` among the ``q`` options,
  :math:`P = \exp(f_{o_0}/s) / \sum_j \exp(f_{o_j}/s)` (Gumbel noise of scale ``s`` on each
  utility); with ``q = 2`` it is :class:`PairwiseLogit` exactly.
* :class:`Ranking` (Plackett-Luce): a full or top-k ranking, a product of choices among the
  remaining options, computed by :func:`plackett_luce_stages`, the code the LFPL module uses.
* Ties ("no preference"): :class:`PairwiseProbit` and :class:`PairwiseLogit` with a
  ``tie_threshold`` :math:`\theta > 0` are ordinal models, a tie being an answer whose
  perceived utility difference lies within :math:`\pm\theta`:
  :math:`P(\text{tie}) = F((\theta - \delta)/s) - F((-\theta - \delta)/s)` and
  :math:`P(v \succ u) = F((\delta - \theta)/s)`. :math:`\theta` is a hyperparameter (positive
  constraint, prior) that the Laplace evidence fits with the kernel's.

Scale convention: BoTorch's :class:`~botorch.models.PairwiseGP` fixes the probit noise at one, so
that :math:`P = \Phi(\delta / \sqrt 2)`, and lets the kernel's outputscale absorb the noise level.
:class:`PairwiseProbit` keeps that default (``noise_std=1`` gives :math:`s = \sqrt 2 \cdot 1`), and
:class:`PairwiseLogit` defaults to BoTorch's :math:`P = \operatorname{sigmoid}(\delta)`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from enum import IntEnum

import torch
from gpytorch.constraints import Interval, Positive
from gpytorch.likelihoods import Likelihood
from gpytorch.priors import GammaPrior, Prior
from torch import Tensor
from torch.distributions import Bernoulli

__all__ = [
    "Choice",
    "ObservationKind",
    "PairwiseLikelihood",
    "PairwiseLogit",
    "PairwiseProbit",
    "Ranking",
    "plackett_luce_stages",
    "probit_hazard",
]


class ObservationKind(IntEnum):
    """What an observation over a set of designs says (the engine's per-observation ``kind``).

    * ``PAIR``: ``(v, u)``, design ``v`` beat design ``u``.
    * ``CHOICE``: the first of ``q > 2`` options was picked as the best.
    * ``RANKING``: the options are ranked best first; the first ``n_stages`` places count (a
      full ranking of ``q`` options has ``q - 1`` stages, a top-k ranking ``k``).
    * ``TIE``: "no preference" between two designs.
    """

    PAIR = 0
    CHOICE = 1
    RANKING = 2
    TIE = 3


def _log1mexp(x: Tensor) -> Tensor:
    r""":math:`\log(1 - e^x)` for :math:`x < 0`, accurate on both sides of :math:`-\log 2`."""
    return torch.where(
        x > -math.log(2.0),
        torch.log(-torch.expm1(x.clamp_max(-1e-300 if x.dtype == torch.float64 else -1e-38))),
        torch.log1p(-torch.exp(x.clamp_max(-math.log(2.0)))),
    )


def plackett_luce_stages(
    scores: Tensor, n_stages: Tensor, valid: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    r"""Per-stage Plackett-Luce log-probabilities of rankings listed best first.

    For scores :math:`s_1, \dots, s_M` in preference order, stage :math:`t` (the choice of the
    :math:`t`-th option among those not yet placed) has log-probability

    .. math::

        \ell_t = s_t - \log \sum_{l \ge t} e^{s_l}, \qquad t < k,

    and zero for :math:`t \ge k` (``n_stages``). The tail log-sum-exps are one reverse
    ``logcumsumexp``. This is the core both the LFPL module
    (:func:`botorch_pref.lfpl.plackett_luce.plackett_luce_nll`) and the GP likelihoods
    (:class:`Ranking`, :class:`Choice`) use.

    Args:
        scores: ``(*batch, M)`` scores, best first.
        n_stages: ``(*batch)`` integer numbers of counted stages (at most ``M - 1`` are
            meaningful; the last place is not a choice).
        valid: Optional ``(*batch, M)`` bool mask; invalid (padding) entries are replaced by a
            very negative finite number before the log-sum-exps (their value, NaN included,
            never reaches a result or a gradient).

    Returns:
        ``(stage_log_prob, tail_lse)``, both ``(*batch, M)``: the stage log-probabilities (zero
        where not counted) and the tail log-sum-exps :math:`\log\sum_{l\ge t} e^{s_l}`.
    """
    if valid is not None:
        # A very negative finite fill: exp(fill - s) == 0 exactly, and unlike -inf it keeps
        # the backward pass of logcumsumexp free of NaN.
        fill = torch.finfo(scores.dtype).min
        scores = torch.where(valid, scores, torch.full_like(scores, fill))
    tail_lse = torch.logcumsumexp(scores.flip(-1), dim=-1).flip(-1)
    positions = torch.arange(scores.shape[-1], device=scores.device)
    counted = positions < n_stages.unsqueeze(-1)
    stage = torch.where(counted, scores - tail_lse, torch.zeros_like(scores))
    return stage, tail_lse


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
    under a Gaussian belief about :math:`\delta` is :meth:`predictive_probability`. Observations
    other than pairs go through :meth:`observation_derivatives`; the kinds a likelihood can
    model are :attr:`supported_kinds` (:meth:`check_kinds` raises a clear error otherwise).
    """

    def __init__(self) -> None:
        super().__init__(max_plate_nesting=1)
        self.has_ties = False

    @property
    def supported_kinds(self) -> frozenset[ObservationKind]:
        """The observation kinds this likelihood can model."""
        kinds = {ObservationKind.PAIR}
        if self.has_ties:
            kinds.add(ObservationKind.TIE)
        return frozenset(kinds)

    def check_kinds(self, kinds: Iterable[int]) -> None:
        """Raise a ``ValueError`` naming the first observation kind this likelihood cannot model.

        Args:
            kinds: Observation kinds (:class:`ObservationKind` values) present in the data.
        """
        supported = self.supported_kinds
        for kind in sorted({int(k) for k in kinds}):
            kind = ObservationKind(kind)
            if kind in supported:
                continue
            if kind == ObservationKind.TIE:
                hint = (
                    "ties ('no preference') need a tie threshold: use PairwiseProbit(..., "
                    "tie_threshold=...) or PairwiseLogit(..., tie_threshold=...)"
                )
            elif kind == ObservationKind.CHOICE:
                hint = "a choice among q > 2 options needs Choice() or Ranking()"
            else:
                hint = "a ranking of more than two options needs Ranking()"
            raise ValueError(
                f"{type(self).__name__} cannot model {kind.name} observations: {hint}."
            )

    # ------------------------------------------------------------------ ties
    def _init_tie_threshold(
        self,
        tie_threshold: float | None,
        prior: Prior | None,
        constraint: Interval | None,
    ) -> None:
        self.has_ties = tie_threshold is not None
        if tie_threshold is None:
            return
        tie_threshold = float(tie_threshold)
        if not math.isfinite(tie_threshold) or tie_threshold <= 0:
            raise ValueError(
                f"tie_threshold must be a positive finite number, got {tie_threshold}."
            )
        self.register_parameter(
            "raw_tie_threshold", torch.nn.Parameter(torch.zeros((), dtype=torch.float64))
        )
        self.register_constraint("raw_tie_threshold", constraint or Positive())
        if prior is not None:
            self.register_prior(
                "tie_threshold_prior",
                prior,
                lambda m: m.tie_threshold,
                lambda m, v: m._set_tie_threshold(v),
            )
        self._set_tie_threshold(tie_threshold)

    @property
    def tie_threshold(self) -> Tensor | None:
        r"""The tie threshold :math:`\theta` (a 0-dim tensor), or ``None`` without ties."""
        if not self.has_ties:
            return None
        return self.raw_tie_threshold_constraint.transform(self.raw_tie_threshold)

    @tie_threshold.setter
    def tie_threshold(self, value: float | Tensor) -> None:
        if not self.has_ties:
            raise AttributeError("This likelihood was built without a tie threshold.")
        self._set_tie_threshold(value)

    def _set_tie_threshold(self, value: float | Tensor) -> None:
        value = torch.as_tensor(value).to(self.raw_tie_threshold)
        self.initialize(
            raw_tie_threshold=self.raw_tie_threshold_constraint.inverse_transform(value)
        )

    def _shift(self, delta: Tensor) -> Tensor:
        r"""The difference the win probability sees: :math:`\delta - \theta` with ties."""
        if not self.has_ties:
            return delta
        return delta - self.tie_threshold.to(delta)

    def _log_pdf(self, x: Tensor) -> Tensor:
        """Log-density of the standardised link at ``x``."""
        raise NotImplementedError

    def _pdf_score(self, x: Tensor) -> Tensor:
        """:math:`F''(x) / F'(x)` of the standardised link."""
        raise NotImplementedError

    def _log_interval(self, a: Tensor, b: Tensor) -> Tensor:
        r""":math:`\log(F(a) - F(b))` for :math:`a > b` and :math:`a + b \le 0`."""
        raise NotImplementedError

    def tie_derivatives(self, delta: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        r"""Log-probability of a tie and its first and negative second derivatives in ``delta``.

        With :math:`a = (\theta - |\delta|)/s`, :math:`b = (-\theta - |\delta|)/s` (the tie
        probability is even in :math:`\delta`, and :math:`a + b \le 0` keeps the difference of
        CDFs on the accurate side), :math:`D = F(a) - F(b)`, :math:`r_a = F'(a)/D`,
        :math:`r_b = F'(b)/D`:

        .. math::

            \frac{d \log D}{d|\delta|} = -\frac{r_a - r_b}{s}, \qquad
            -\frac{d^2 \log D}{d\delta^2} = \frac{(r_a - r_b)^2 - (r_a \rho(a) - r_b \rho(b))}
            {s^2},

        with :math:`\rho = F''/F'`. The curvature is non-negative because :math:`D` is the
        convolution of a log-concave density with an interval's indicator (it is clamped at zero
        against rounding). Differentiable in :math:`\theta` (torch operations only).

        Args:
            delta: Utility differences, any shape.

        Returns:
            ``(log_p, grad, neg_hess)`` shaped like ``delta``.
        """
        if not self.has_ties:
            raise ValueError(f"{type(self).__name__} was built without a tie_threshold.")
        s = self.scale
        theta = self.tie_threshold.to(delta)
        sign = torch.where(delta < 0, -1.0, 1.0).to(delta)
        x = delta.abs()
        a = (theta - x) / s
        b = (-theta - x) / s
        log_d = self._log_interval(a, b)
        ra = torch.exp(self._log_pdf(a) - log_d)
        rb = torch.exp(self._log_pdf(b) - log_d)
        grad = -sign * (ra - rb) / s
        neg_hess = ((ra - rb) ** 2 - (ra * self._pdf_score(a) - rb * self._pdf_score(b))) / (s * s)
        return log_d, grad, neg_hess.clamp_min(0.0)

    # ---------------------------------------------------------- observations
    def _ranking_terms(
        self, delta: Tensor, n_stages: Tensor, valid: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        raise NotImplementedError

    def observation_derivatives(
        self,
        delta: Tensor,
        kind: Tensor,
        n_stages: Tensor,
        valid: Tensor,
        kinds: Iterable[int] | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        r"""Log-probabilities, gradients and negative Hessian blocks of general observations.

        Observation ``k`` over options :math:`(o_0, \dots, o_{Q-1})` (best first, padded) is a
        function of :math:`\delta_j = f(o_0) - f(o_j)`, :math:`j = 1, \dots, Q-1`. A pair or a
        tie uses :math:`\delta_1` only; a choice or a ranking all valid :math:`\delta_j`.

        Args:
            delta: ``(*batch, m, Q-1)`` differences (zero at padding).
            kind: ``(*batch, m)`` :class:`ObservationKind` values.
            n_stages: ``(*batch, m)`` ranked stages (1 for a pair or choice, 0 for a tie).
            valid: ``(*batch, m, Q)`` bool mask of real options (padding observations have none).
            kinds: The kinds present (saves a device synchronisation per call), or ``None``.

        Returns:
            ``(log_p, grad, neg_hess)`` of shapes ``(*batch, m)``, ``(*batch, m, Q-1)`` and
            ``(*batch, m, Q-1, Q-1)``, zero at padding.
        """
        if kinds is None:
            kinds = set(kind[valid[..., 0]].unique().tolist())
        kinds = {int(k) for k in kinds}
        self.check_kinds(kinds)
        Q1 = delta.shape[-1]
        log_p = torch.zeros(delta.shape[:-1], dtype=delta.dtype, device=delta.device)
        grad = torch.zeros_like(delta)
        neg_hess = torch.zeros(*delta.shape, Q1, dtype=delta.dtype, device=delta.device)
        real = valid[..., 0]
        d1 = delta[..., 0]
        first = torch.zeros(Q1, dtype=torch.bool, device=delta.device)
        first[0] = True
        first_block = first.unsqueeze(-1) & first.unsqueeze(-2)
        for k, method in (
            (ObservationKind.PAIR, self.derivatives),
            (ObservationKind.TIE, self.tie_derivatives),
        ):
            if int(k) not in kinds:
                continue
            mask = real & (kind == int(k))
            lp, g, h = method(d1)
            log_p = torch.where(mask, lp, log_p)
            grad = torch.where(mask.unsqueeze(-1) & first, g.unsqueeze(-1), grad)
            neg_hess = torch.where(
                mask.unsqueeze(-1).unsqueeze(-1) & first_block, h[..., None, None], neg_hess
            )
        if kinds & {int(ObservationKind.CHOICE), int(ObservationKind.RANKING)}:
            mask = real & ((kind == ObservationKind.CHOICE) | (kind == ObservationKind.RANKING))
            lp, g, h = self._ranking_terms(delta, n_stages, valid)
            log_p = torch.where(mask, lp, log_p)
            grad = torch.where(mask.unsqueeze(-1), g, grad)
            neg_hess = torch.where(mask[..., None, None], h, neg_hess)
        return log_p, grad, neg_hess

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

    With a ``tie_threshold`` :math:`\theta` the model is ordinal: the person reports "no
    preference" when the perceived difference lies within :math:`\pm\theta`, so
    :math:`P(\text{tie}) = \Phi((\theta - \delta)/s) - \Phi((-\theta - \delta)/s)` and
    :math:`P(v \succ u) = \Phi((\delta - \theta)/s)`. :math:`\theta` (utility units) is a
    hyperparameter fitted by the Laplace evidence; without a threshold nothing changes.

    Args:
        noise_std: The per-option noise standard deviation :math:`\sigma > 0`.
        tie_threshold: Initial :math:`\theta > 0`, or ``None`` (default) for a model without
            ties (no parameter, exactly the pairwise probit).
        tie_threshold_prior: Prior on :math:`\theta`; default ``Gamma(2, 2)`` (mode 0.5, mean
            1); ``False`` or ``None`` for no prior.
        tie_threshold_constraint: Constraint on :math:`\theta`; default ``Positive()``.
    """

    def __init__(
        self,
        noise_std: float = 1.0,
        tie_threshold: float | None = None,
        tie_threshold_prior: Prior | bool | None = True,
        tie_threshold_constraint: Interval | None = None,
    ) -> None:
        super().__init__()
        noise_std = float(noise_std)
        if not math.isfinite(noise_std) or noise_std <= 0:
            raise ValueError(f"noise_std must be a positive finite number, got {noise_std}.")
        self.noise_std = noise_std
        self._init_tie_threshold(
            tie_threshold, _default_tie_prior(tie_threshold_prior), tie_threshold_constraint
        )

    @property
    def scale(self) -> float:
        return math.sqrt(2.0) * self.noise_std

    def log_prob(self, delta: Tensor) -> Tensor:
        return torch.special.log_ndtr(self._shift(delta) / self.scale)

    def derivatives(self, delta: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        s = self.scale
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


def _default_tie_prior(prior: Prior | bool | None) -> Prior | None:
    if prior is True:
        return GammaPrior(2.0, 2.0)
    if prior is False or prior is None:
        return None
    return prior


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

    With a ``tie_threshold`` :math:`\theta` the model is the ordinal logit:
    :math:`P(\text{tie}) = \sigma((\theta - \delta)/s) - \sigma((-\theta - \delta)/s)` and
    :math:`P(v \succ u) = \sigma((\delta - \theta)/s)` (Rao-Kupper style), see
    :class:`PairwiseProbit`.

    Args:
        scale: The logistic scale :math:`s > 0`.
        tie_threshold: Initial :math:`\theta > 0`, or ``None`` (default) for no ties.
        tie_threshold_prior: Prior on :math:`\theta`; default ``Gamma(2, 2)``; ``False`` for none.
        tie_threshold_constraint: Constraint on :math:`\theta`; default ``Positive()``.
    """

    def __init__(
        self,
        scale: float = 1.0,
        tie_threshold: float | None = None,
        tie_threshold_prior: Prior | bool | None = True,
        tie_threshold_constraint: Interval | None = None,
    ) -> None:
        super().__init__()
        scale = float(scale)
        if not math.isfinite(scale) or scale <= 0:
            raise ValueError(f"scale must be a positive finite number, got {scale}.")
        self._scale = scale
        self._gh_cache: dict[tuple[torch.dtype, torch.device], tuple[Tensor, Tensor]] = {}
        self._init_tie_threshold(
            tie_threshold, _default_tie_prior(tie_threshold_prior), tie_threshold_constraint
        )

    @property
    def scale(self) -> float:
        return self._scale

    def log_prob(self, delta: Tensor) -> Tensor:
        return torch.nn.functional.logsigmoid(self._shift(delta) / self._scale)

    def derivatives(self, delta: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        s = self._scale
        z = self._shift(delta) / s
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
        mean = self._shift(mean)
        return (torch.sigmoid((mean.unsqueeze(-1) + sd * nodes) / self._scale) * weights).sum(-1)

    def _log_pdf(self, x: Tensor) -> Tensor:
        return torch.nn.functional.logsigmoid(x) + torch.nn.functional.logsigmoid(-x)

    def _pdf_score(self, x: Tensor) -> Tensor:
        return -torch.tanh(0.5 * x)

    def _log_interval(self, a: Tensor, b: Tensor) -> Tensor:
        # sigmoid(a) - sigmoid(b) = sigmoid(a) sigmoid(-b) (1 - exp(b - a)), exact for a > b
        logsig = torch.nn.functional.logsigmoid
        return logsig(a) + logsig(-b) + _log1mexp(b - a)


class Choice(PairwiseLogit):
    r"""Multinomial logit: the person picks the best of ``q`` options.

    Independent Gumbel noise of scale :math:`s` on each option's utility gives

    .. math::

        P(o_0 \text{ chosen from } o_0, \dots, o_{q-1})
            = \frac{e^{f(o_0)/s}}{\sum_j e^{f(o_j)/s}},

    which for ``q = 2`` is :class:`PairwiseLogit`'s :math:`\operatorname{sigmoid}(\delta/s)`
    exactly (pairs take the pairwise code path). In the difference coordinates
    :math:`\delta_j = f(o_0) - f(o_j)` with :math:`x_j = -\delta_j/s` (:math:`x_0 = 0`) and
    :math:`p = \operatorname{softmax}(x)`, the gradient is :math:`h_j = p_j / s` and the negative
    Hessian :math:`\hat H = (\operatorname{diag}(p) - p p^\top)_{j,l \ge 1} / s^2`, positive
    definite (its determinant is :math:`p_0 \prod_{j \ge 1} p_j / s^{2(q-1)}`) but nearly
    singular when an option is far worse than the others.

    Args:
        scale: The Gumbel scale :math:`s > 0`.
    """

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__(scale=scale)

    @property
    def supported_kinds(self) -> frozenset[ObservationKind]:
        return frozenset({ObservationKind.PAIR, ObservationKind.CHOICE})

    def _ranking_terms(
        self, delta: Tensor, n_stages: Tensor, valid: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        r"""Plackett-Luce log-probability, gradient and negative Hessian in :math:`\delta`.

        Stage :math:`t` chooses option :math:`t` among :math:`\{l \ge t\}` with softmax
        :math:`p^{(t)}`; :math:`\nabla_x \log P = \sum_t (e_t - p^{(t)})` and
        :math:`-\nabla^2_x \log P = \sum_t \operatorname{diag}(p^{(t)}) - p^{(t)} p^{(t)\top}`,
        mapped to :math:`\delta = -s x` (dropping :math:`x_0 = 0`).
        """
        s = self._scale
        x = torch.cat([torch.zeros_like(delta[..., :1]), -delta / s], dim=-1)
        stage, tail = plackett_luce_stages(x, n_stages, valid)
        Q = x.shape[-1]
        pos = torch.arange(Q, device=x.device)
        counted = pos < n_stages.unsqueeze(-1)  # stages t
        allowed = (
            counted.unsqueeze(-1)
            & (pos.unsqueeze(-1) <= pos.unsqueeze(-2))  # l >= t
            & valid.unsqueeze(-2)
        )
        # masked exponent first: an unmasked exp(x - tail) can overflow where the tail is all
        # padding, and torch.where would then pass 0 * inf = NaN to the backward pass
        zero = torch.zeros((), dtype=x.dtype, device=x.device)
        log_P = torch.where(allowed, x.unsqueeze(-2) - tail.unsqueeze(-1), zero)
        P = torch.where(allowed, torch.exp(log_P), zero)  # (..., stage t, option l)
        grad_x = counted.to(x.dtype) - P.sum(-2)
        neg_hess_x = torch.diag_embed(P.sum(-2)) - P.transpose(-1, -2) @ P
        return (
            stage.sum(-1),
            -grad_x[..., 1:] / s,
            neg_hess_x[..., 1:, 1:] / (s * s),
        )


class Ranking(Choice):
    r"""Plackett-Luce likelihood of full or top-k rankings of ``q`` options.

    A ranking :math:`o_0 \succ o_1 \succ \dots` with ``k`` counted stages has probability

    .. math::

        P = \prod_{t < k} \frac{e^{f(o_t)/s}}{\sum_{l \ge t} e^{f(o_l)/s}},

    a product of :class:`Choice` probabilities among the options not yet placed (the LFPL
    module's Plackett-Luce, :func:`plackett_luce_stages`). Gumbel noise of scale :math:`s` on
    each utility and sorting gives exactly this distribution. Choices (one stage) and pairs
    are special cases, so this likelihood models all three kinds.

    Args:
        scale: The Gumbel scale :math:`s > 0`.
    """

    @property
    def supported_kinds(self) -> frozenset[ObservationKind]:
        return frozenset({ObservationKind.PAIR, ObservationKind.CHOICE, ObservationKind.RANKING})
