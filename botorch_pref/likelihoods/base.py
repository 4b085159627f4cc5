r"""The base class of preference likelihoods: pairs, ties and general observations.

A comparison row ``(v, u)`` says that design ``v`` beat design ``u``; every pairwise likelihood
is a function of the utility difference :math:`\delta = f_v - f_u` alone,
:math:`P(v \succ u \mid f) = F(\delta / s)` for a link ``F`` (a CDF) and a scale ``s``.
The Laplace engines (:mod:`botorch_pref.inference`) need the log-probability, its first
derivative and its negative second derivative at a vector of differences
(:meth:`PairwiseLikelihood.derivatives`).

An observation over a set of designs :math:`S = (o_0, \dots, o_{q-1})`, listed best first
(:class:`ObservationKind`), is written in difference coordinates
:math:`\delta_j = f(o_0) - f(o_j)`, :math:`j = 1, \dots, q-1`;
:meth:`PairwiseLikelihood.observation_derivatives` returns its log-probability, the gradient
:math:`h` in :math:`\delta` and the positive semi-definite negative Hessian block :math:`H`
(``(q-1) x (q-1)``) that the block engine assembles into :math:`W = A^\top H A`.

Ties ("no preference") make a pairwise likelihood ordinal: with a threshold :math:`\theta > 0`,
a tie is an answer whose perceived difference lies within :math:`\pm\theta`,

.. math::

    P(\text{tie}) = F((\theta - \delta)/s) - F((-\theta - \delta)/s), \qquad
    P(v \succ u) = F((\delta - \theta)/s),

and :math:`\theta` is a hyperparameter (positive constraint, prior) that the Laplace evidence
fits with the kernel's. Graded comparisons on ``k`` levels and ratings generalise it
(:mod:`~botorch_pref.likelihoods.ordinal`, mixed into :class:`PairwiseLikelihood`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from enum import IntEnum
from typing import TypedDict

import torch
from gpytorch.constraints import Interval, Positive
from gpytorch.likelihoods import Likelihood
from gpytorch.priors import GammaPrior, Prior
from torch import Tensor
from torch.distributions import Bernoulli

from botorch_pref.likelihoods.ordinal import OrdinalAnswers

__all__ = [
    "SCALAR_KINDS",
    "AnswerThresholds",
    "ObservationKind",
    "PairwiseLikelihood",
    "positive_float",
]


class ObservationKind(IntEnum):
    """What an observation over a set of designs says (the engine's per-observation ``kind``).

    * ``PAIR``: ``(v, u)``, design ``v`` beat design ``u``.
    * ``CHOICE``: the first of ``q > 2`` options was picked as the best.
    * ``RANKING``: the options are ranked best first; the first ``n_stages`` places count (a
      full ranking of ``q`` options has ``q - 1`` stages, a top-k ranking ``k``).
    * ``TIE``: "no preference" between two designs.
    * ``GRADED``: a graded comparison ``(a, b)`` on ``k`` levels of ``f(a) - f(b)``, its level
      in the data's per-row ``level`` (:mod:`~botorch_pref.likelihoods.ordinal`).
    * ``RATING``: a rating of one design on ``k`` levels of its utility.
    """

    PAIR = 0
    CHOICE = 1
    RANKING = 2
    TIE = 3
    GRADED = 4
    RATING = 5


#: The kinds whose log-likelihood is a function of one difference row (a rating's row is the
#: utility itself, a row against the origin): the pair engine and EP handle them.
SCALAR_KINDS = frozenset(
    {ObservationKind.PAIR, ObservationKind.TIE, ObservationKind.GRADED, ObservationKind.RATING}
)


def positive_float(value: float, name: str) -> float:
    """``value`` as a float; a ``ValueError`` naming ``name`` unless positive and finite."""
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value}.")
    return value


def _default_tie_prior(prior: Prior | bool | None) -> Prior | None:
    if prior is True:
        return GammaPrior(2.0, 2.0)
    if prior is False or prior is None:
        return None
    return prior


class AnswerThresholds(TypedDict, total=False):
    r"""The keyword settings of a likelihood's answers beyond "v beat u" (all optional).

    Attributes:
        tie_threshold: Initial tie threshold :math:`\theta > 0`, or ``None`` (default) for a
            model without ties (no parameter, exactly the plain pairwise link).
        tie_threshold_prior: Prior on :math:`\theta`; ``True`` (default) for ``Gamma(2, 2)``
            (mode 0.5, mean 1), ``False`` or ``None`` for none.
        tie_threshold_constraint: Constraint on :math:`\theta`; default ``Positive()``.
        graded_levels: Levels of graded comparisons (``>= 2``), or ``None`` to take them from
            the data (:meth:`~botorch_pref.likelihoods.ordinal.OrdinalAnswers.match_levels`).
        rating_levels: Levels of ratings (``>= 2``), or ``None`` to take them from the data.
    """

    tie_threshold: float | None
    tie_threshold_prior: Prior | bool | None
    tie_threshold_constraint: Interval | None
    graded_levels: int | None
    rating_levels: int | None


class PairwiseLikelihood(OrdinalAnswers, Likelihood):
    r"""Base class: a link :math:`P(v \succ u) = \sigma(\delta / s)` of the utility difference.

    Subclasses implement :meth:`derivatives` and :meth:`log_prob`; the predictive probability
    under a Gaussian belief about :math:`\delta` is :meth:`predictive_probability`. Observations
    other than pairs go through :meth:`observation_derivatives`; the kinds a likelihood can
    model are :attr:`supported_kinds` (:meth:`check_kinds` raises a clear error otherwise).

    The constructor's arguments are the answers' settings, keyword only: those of
    :class:`AnswerThresholds`, with the same defaults.
    """

    def __init__(
        self,
        *,
        tie_threshold: float | None = None,
        tie_threshold_prior: Prior | bool | None = True,
        tie_threshold_constraint: Interval | None = None,
        graded_levels: int | None = None,
        rating_levels: int | None = None,
    ) -> None:
        super().__init__(max_plate_nesting=1)
        self._init_tie_threshold(
            tie_threshold, _default_tie_prior(tie_threshold_prior), tie_threshold_constraint
        )
        self._init_ordinal(graded_levels, rating_levels)

    @property
    def supported_kinds(self) -> frozenset[ObservationKind]:
        """The observation kinds this likelihood can model (graded comparisons and ratings
        always: their thresholds are made from the data's number of levels when missing)."""
        kinds = {ObservationKind.PAIR, ObservationKind.GRADED, ObservationKind.RATING}
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
            elif kind in (ObservationKind.GRADED, ObservationKind.RATING):
                hint = "graded comparisons and ratings need PairwiseProbit or PairwiseLogit"
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
        tie_threshold = positive_float(tie_threshold, "tie_threshold")
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

    def batch_tie_threshold(self, batch_shape: torch.Size) -> None:
        """Give each member of a batched model its own tie threshold, starting from the current.

        A model with ``batch_shape = (b,)`` whose members are independent problems (the loop's
        batched back end) needs one threshold per member, as it has one kernel per member;
        utility differences then carry the batch in their leading dimension.

        Args:
            batch_shape: The model's one-dimensional batch shape.

        Raises:
            ValueError: For a likelihood without ties, or a batch shape that is not ``(b,)``.
        """
        if not self.has_ties:
            raise ValueError(f"{type(self).__name__} was built without a tie_threshold.")
        if len(batch_shape) != 1:
            raise ValueError(f"batch_shape must be (b,), got {tuple(batch_shape)}.")
        raw = self.raw_tie_threshold.detach()
        if raw.shape == batch_shape:
            return
        if raw.dim() != 0:
            raise ValueError(
                f"the tie threshold already has batch shape {tuple(raw.shape)}, not "
                f"{tuple(batch_shape)}."
            )
        self.raw_tie_threshold = torch.nn.Parameter(raw.expand(batch_shape).clone())

    @property
    def tie_threshold(self) -> Tensor | None:
        r"""The tie threshold :math:`\theta` (a 0-dim tensor, or ``(b,)`` per batch member,
        see :meth:`batch_tie_threshold`), or ``None`` without ties."""
        if not self.has_ties:
            return None
        return self.raw_tie_threshold_constraint.transform(self.raw_tie_threshold)

    @tie_threshold.setter
    def tie_threshold(self, value: float | Tensor) -> None:
        if not self.has_ties:
            raise AttributeError("This likelihood was built without a tie threshold.")
        checked = torch.as_tensor(value)
        if checked.is_complex() or not bool((torch.isfinite(checked) & (checked > 0)).all()):
            raise ValueError(f"tie_threshold must be positive and finite, got {value}.")
        self._set_tie_threshold(value)

    def _set_tie_threshold(self, value: float | Tensor) -> None:
        value = torch.as_tensor(value).to(self.raw_tie_threshold)
        self.initialize(
            raw_tie_threshold=self.raw_tie_threshold_constraint.inverse_transform(value)
        )

    def _theta(self, delta: Tensor) -> Tensor:
        """The tie threshold, broadcastable against ``delta`` (batch members leading)."""
        theta = self.tie_threshold.to(delta)
        return theta.reshape(theta.shape + (1,) * (delta.dim() - theta.dim()))

    def _shift(self, delta: Tensor) -> Tensor:
        r"""The difference the win probability sees: :math:`\delta - \theta` with ties."""
        if not self.has_ties:
            return delta
        return delta - self._theta(delta)

    def _log_pdf(self, x: Tensor) -> Tensor:
        """Log-density of the standardised link at ``x``."""
        raise NotImplementedError

    def _pdf_score(self, x: Tensor) -> Tensor:
        """:math:`F''(x) / F'(x)` of the standardised link."""
        raise NotImplementedError

    def _log_interval(self, a: Tensor, b: Tensor) -> Tensor:
        r""":math:`\log(F(a) - F(b))` for :math:`a > b` and :math:`a + b \le 0`."""
        raise NotImplementedError

    def tie_derivatives(
        self, delta: Tensor, scale: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
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
            scale: Another scale in place of :attr:`scale` (a positive tensor broadcastable to
                ``delta``), or ``None``; see :meth:`derivatives`.

        Returns:
            ``(log_p, grad, neg_hess)`` shaped like ``delta``.
        """
        if not self.has_ties:
            raise ValueError(f"{type(self).__name__} was built without a tie_threshold.")
        s = self.scale if scale is None else scale
        theta = self._theta(delta)
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
        level: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        r"""Log-probabilities, gradients and negative Hessian blocks of general observations.

        Observation ``k`` over options :math:`(o_0, \dots, o_{Q-1})` (best first, padded) is a
        function of :math:`\delta_j = f(o_0) - f(o_j)`, :math:`j = 1, \dots, Q-1`. A pair, a
        tie or a graded comparison uses :math:`\delta_1` only; a rating's :math:`\delta_1` is
        its design's utility (its row is against the origin); a choice or a ranking uses all
        valid :math:`\delta_j`.

        Args:
            delta: ``(*batch, m, Q-1)`` differences (zero at padding).
            kind: ``(*batch, m)`` :class:`ObservationKind` values.
            n_stages: ``(*batch, m)`` ranked stages (1 for a pair or choice, 0 for a tie).
            valid: ``(*batch, m, Q)`` bool mask of real options (padding observations have none).
            kinds: The kinds present (saves a device synchronisation per call), or ``None``.
            level: ``(*batch, m)`` levels of graded comparisons and ratings (needed when the
                data hold them), or ``None``.

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
            (ObservationKind.GRADED, lambda x: self.graded_derivatives(x, level)),
            (ObservationKind.RATING, lambda x: self.rating_derivatives(x, level)),
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

    def row_derivatives(
        self,
        x: Tensor,
        kind: Tensor,
        level: Tensor,
        kinds: Iterable[int],
        scale: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        r"""Log-probabilities and derivatives of answers that are functions of one row each.

        Row ``k`` holds :math:`x_k`: the difference winner minus loser of a pair, first minus
        second option of a tie or a graded comparison, the utility of a rated design
        (:data:`SCALAR_KINDS`).

        Args:
            x: Row values, any shape.
            kind: :class:`ObservationKind` values shaped like ``x`` (padding rows may hold any
                of ``kinds``; the caller masks them).
            level: Levels shaped like ``x`` (read for graded comparisons and ratings only).
            kinds: The kinds present.
            scale: The pair scale to evaluate the link at in place of :attr:`scale` (a rating
                takes :math:`\sqrt{\text{scale}^2 - s^2/2}`, so that the expectation-propagation
                use, ``scale`` :math:`= \sqrt{s^2 + v}`, gives ratings
                :math:`\sqrt{s^2/2 + v}`), or ``None``.

        Returns:
            ``(log_p, grad, neg_hess)`` shaped like ``x``.
        """
        kinds = {int(k) for k in kinds}
        self.check_kinds(kinds)
        rating_scale = None
        if scale is not None and int(ObservationKind.RATING) in kinds:
            rating_scale = torch.sqrt(scale * scale - self.scale**2 / 2.0)
        methods = {
            ObservationKind.PAIR: lambda: self.derivatives(x, scale),
            ObservationKind.TIE: lambda: self.tie_derivatives(x, scale),
            ObservationKind.GRADED: lambda: self.graded_derivatives(x, level, scale),
            ObservationKind.RATING: lambda: self.rating_derivatives(x, level, rating_scale),
        }
        out = None
        for k in sorted(kinds):
            terms = methods[ObservationKind(k)]()
            if out is None:
                out = terms
                continue
            mask = kind == k
            out = tuple(torch.where(mask, t, o) for t, o in zip(terms, out, strict=True))
        return out

    @property
    def scale(self) -> float:
        """The scale :math:`s` that divides the utility difference."""
        raise NotImplementedError

    def log_prob(self, delta: Tensor) -> Tensor:
        r"""Log-probability :math:`\log P(v \succ u)` for utility differences ``delta``."""
        raise NotImplementedError

    def derivatives(
        self, delta: Tensor, scale: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        r"""Log-probability and its first and negative second derivatives in ``delta``.

        Args:
            delta: Utility differences :math:`f_v - f_u`, any shape.
            scale: Another scale in place of :attr:`scale` (a positive tensor broadcastable to
                ``delta``), or ``None``. For the probit link,
                :math:`E[\Phi(\delta/s)]` over :math:`\delta \sim N(m, v)` is
                :math:`\Phi(m / \sqrt{s^2 + v})`, the link at scale :math:`\sqrt{s^2 + v}`
                (and likewise for a tie), which is how expectation propagation's tilted moments
                are computed (:mod:`botorch_pref.inference.ep`).

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
