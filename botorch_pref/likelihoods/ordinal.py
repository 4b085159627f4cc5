r"""Ordinal answers: graded comparisons and ratings, interval likelihoods with fitted thresholds.

Both answers report which of ``k`` ordered intervals a noisy perceived quantity fell into. With
cut points :math:`-\infty = c_0 < c_1 < \dots < c_{k-1} < c_k = +\infty`, a link ``F`` (a CDF)
and a scale ``s``, level :math:`\ell \in \{0, \dots, k-1\}` of a quantity :math:`x` has

.. math::

    P(\ell \mid x) = F\Big(\frac{c_{\ell+1} - x}{s}\Big) - F\Big(\frac{c_\ell - x}{s}\Big),

the probability that :math:`x + s\varepsilon`, :math:`\varepsilon \sim F`, lands in
:math:`(c_\ell, c_{\ell+1}]` (Chu & Ghahramani, "Gaussian processes for ordinal regression",
JMLR 2005). :math:`\log P` is concave in :math:`x` for a log-concave density ``F'`` (it is the
log of the convolution of that density with an interval's indicator), so every answer adds a
positive semi-definite curvature and the Laplace engines' Newton iterations keep their
guarantees.

**Graded comparison** of designs ``a`` and ``b``: :math:`x = \delta = f(a) - f(b)` with the
pair's scale (:math:`s = \sqrt 2 \sigma` for the probit), ``k`` levels from "``b`` much
better" (level 0) to "``a`` much better" (level ``k - 1``). The thresholds are *symmetric*,
:math:`t_j = -t_{k-j}`: swapping ``a`` and ``b`` turns level :math:`\ell` into
:math:`k-1-\ell` and changes no probability, as a scale printed "A much better ... B much
better" means the same read from either end. This halves the free thresholds to
:math:`h = \lfloor (k-1)/2 \rfloor` positive increments :math:`\Delta_1, \dots, \Delta_h` with
:math:`\tau_i = \sum_{j \le i} \Delta_j`:

* odd ``k = 2h + 1``: thresholds :math:`\pm\tau_1, \dots, \pm\tau_h`, a middle level
  "about the same" of half-width :math:`\tau_1`. ``k = 3`` is the tie model of
  :class:`~botorch_pref.likelihoods.base.PairwiseLikelihood` (``tie_threshold``
  :math:`\theta = \tau_1`) exactly: same probabilities, same default prior;
* even ``k = 2h + 2``: thresholds :math:`0, \pm\tau_1, \dots, \pm\tau_h`, no middle level
  (``k = 2`` is the plain pairwise likelihood).

Asymmetric thresholds would let a person's habit of answering "slightly" more often for one
side of the screen masquerade as a utility difference; the comparisons of an ask/tell loop
show designs in both orders, so that bias is noise, not signal, and the symmetric model is the
one the evidence can fit from few answers.

**Rating** of one design ``x`` on ``k`` levels (0 worst): the quantity is :math:`f(x)` itself,
with the per-option noise (scale :math:`s / \sqrt 2`, the probit's :math:`\sigma`) and
``k - 1`` free ordered cut points :math:`c_1 + \sum_{j < i} \Delta_j`, parametrised by the first
cut point (a real number) and ``k - 2`` positive increments. Comparisons fix only differences of
:math:`f`; ratings fix its level relative to the cut points, and the scale is shared with the
comparisons (one latent :math:`f`, one noise level).

**Derivatives** in :math:`x` (standardised :math:`a = (c_{\ell+1} - x)/s`,
:math:`b = (c_\ell - x)/s`, :math:`D = F(a) - F(b)`, :math:`r_a = F'(a)/D`,
:math:`r_b = F'(b)/D`, :math:`\rho = F''/F'`):

.. math::

    \frac{d\log P}{dx} = -\frac{r_a - r_b}{s}, \qquad
    -\frac{d^2 \log P}{dx^2} = \frac{(r_a - r_b)^2 - (r_a\rho(a) - r_b\rho(b))}{s^2}.

The two end levels are one-sided, :math:`\log F((x - c_{k-1})/s)` and
:math:`\log F((c_1 - x)/s)`, and take the link's own tail-safe pair formulas; a middle
level is evaluated where :math:`a + b \le 0` (otherwise as :math:`F(-b) - F(-a)`, the same
number), so that the difference of CDFs never cancels, and the probit's far tail takes the
ratio form of :meth:`~botorch_pref.likelihoods.links.PairwiseProbit.tie_derivatives`. All of it
is torch code, differentiable in the thresholds, which the Laplace evidence fits with the
kernel's hyperparameters.
"""

from __future__ import annotations

import math

import torch
from gpytorch.constraints import Positive
from gpytorch.priors import GammaPrior, NormalPrior
from torch import Tensor

from botorch_pref.checks import whole_number

__all__ = ["OrdinalAnswers", "graded_free_thresholds"]

#: Initial increment of the graded thresholds and of the rating cut points (utility units).
_GRADED_START = 0.5
_RATING_START = 1.0


def graded_free_thresholds(levels: int) -> int:
    """Number of free (positive) threshold increments of a ``levels``-level graded scale."""
    return (int(levels) - 1) // 2


class OrdinalAnswers:
    r"""Graded comparisons and ratings for a pairwise likelihood (module docstring).

    Mixed into :class:`~botorch_pref.likelihoods.base.PairwiseLikelihood`; the link enters
    through the likelihood's standardised terms (:meth:`_link_terms`, :meth:`_interval_terms`).
    The number of levels lives here: :attr:`graded_levels` and :attr:`rating_levels` (``None``
    until set, by the constructor or by :meth:`match_levels` from the data).
    """

    graded_levels: int | None
    rating_levels: int | None

    def _init_ordinal(self, graded_levels: int | None, rating_levels: int | None) -> None:
        self.graded_levels = None
        self.rating_levels = None
        self.match_levels(graded_levels, rating_levels)

    def match_levels(self, graded_levels: int | None, rating_levels: int | None) -> None:
        """Give the likelihood ``graded_levels``/``rating_levels`` levels (``None``: keep).

        A likelihood without thresholds for an answer type gets them (at their starting values,
        with their priors); one that has them for another number of levels raises.

        Args:
            graded_levels: Levels of the graded comparisons in the data (``>= 2``), or ``None``.
            rating_levels: Levels of the ratings in the data (``>= 2``), or ``None``.

        Raises:
            ValueError: Naming both numbers when they differ from the likelihood's.
        """
        for levels, attr, what, init in (
            (graded_levels, "graded_levels", "graded comparisons", self._init_graded),
            (rating_levels, "rating_levels", "ratings", self._init_rating),
        ):
            if levels is None:
                continue
            k = whole_number(levels, attr, 2)
            current = getattr(self, attr)
            if current is None:
                init(k)
            elif current != k:
                raise ValueError(
                    f"the data's {what} have {k} levels, the likelihood's {current}: build "
                    f"the likelihood with {attr}={k}."
                )

    def _init_graded(self, k: int) -> None:
        self.graded_levels = k
        h = graded_free_thresholds(k)
        if h > 0:  # Gamma(2, 2) per increment: for k = 3 the tie threshold's default prior
            self._init_increments("graded", h, _GRADED_START)

    def _init_rating(self, k: int) -> None:
        self.rating_levels = k
        first = -0.5 * (k - 2) * _RATING_START  # cut points centred on 0
        self.register_parameter(
            "rating_first_cut", torch.nn.Parameter(torch.tensor(first, dtype=torch.float64))
        )
        self.register_prior(
            "rating_first_cut_prior", NormalPrior(first, 2.0), lambda m: m.rating_first_cut
        )
        if k > 2:
            self._init_increments("rating", k - 2, _RATING_START)

    def _init_increments(self, name: str, n: int, start: float) -> None:
        """``n`` positive increments ``raw_{name}_increments`` (constrained positive, a
        ``Gamma(2, 2)`` prior each), started at ``start``."""
        raw_name = f"raw_{name}_increments"
        self.register_parameter(raw_name, torch.nn.Parameter(torch.zeros(n, dtype=torch.float64)))
        self.register_constraint(raw_name, Positive())
        self.register_prior(
            f"{name}_increments_prior", GammaPrior(2.0, 2.0), lambda m: m._increments(name)
        )
        constraint = getattr(self, f"{raw_name}_constraint")
        raw = constraint.inverse_transform(torch.full((n,), start, dtype=torch.float64))
        self.initialize(**{raw_name: raw})

    def _increments(self, name: str) -> Tensor:
        """The positive increments of ``name`` (``"graded"`` or ``"rating"``)."""
        raw = getattr(self, f"raw_{name}_increments")
        return getattr(self, f"raw_{name}_increments_constraint").transform(raw)

    def _levels(self, attr: str) -> int:
        """``self.<attr>`` (``graded_levels`` or ``rating_levels``), which must be set."""
        k = getattr(self, attr)
        if k is None:
            raise ValueError(
                f"{type(self).__name__} has no {attr.split('_')[0]} levels ({attr}=None)."
            )
        return k

    # ------------------------------------------------------------ thresholds
    @property
    def graded_thresholds(self) -> Tensor:
        r"""The ``k - 1`` graded thresholds :math:`t_1 < \dots < t_{k-1}`, symmetric about 0."""
        k = self._levels("graded_levels")
        if graded_free_thresholds(k) == 0:
            return torch.zeros(1, dtype=torch.float64)
        tau = self._increments("graded").cumsum(-1)
        middle = [tau.new_zeros(1)] if k % 2 == 0 else []
        return torch.cat([-tau.flip(-1), *middle, tau])

    @property
    def rating_cut_points(self) -> Tensor:
        r"""The ``k - 1`` rating cut points :math:`c_1 < \dots < c_{k-1}`."""
        k = self._levels("rating_levels")
        first = self.rating_first_cut.reshape(1)
        if k == 2:
            return first
        return torch.cat([first, first + self._increments("rating").cumsum(-1)])

    @property
    def rating_scale(self) -> float:
        r"""The rating noise scale :math:`s / \sqrt 2` (one option's noise, not a difference's)."""
        return self.scale / math.sqrt(2.0)

    # ------------------------------------------------------------ derivatives
    def _link_terms(self, z: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        r""":math:`\log F(z)`, :math:`F'(z)/F(z)` and :math:`-(\log F)''(z)` of the link."""
        raise NotImplementedError

    def _interval_terms(self, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        r""":math:`\log D`, :math:`r_a - r_b` and :math:`(r_a - r_b)^2 - (r_a\rho(a) -
        r_b\rho(b))` (clamped at zero) of :math:`D = F(a) - F(b)`, for :math:`a > b`,
        :math:`a + b \le 0`, in standardised units."""
        log_d = self._log_interval(a, b)
        ra = torch.exp(self._log_pdf(a) - log_d)
        rb = torch.exp(self._log_pdf(b) - log_d)
        curv = (ra - rb) ** 2 - (ra * self._pdf_score(a) - rb * self._pdf_score(b))
        return log_d, ra - rb, curv.clamp_min(0.0)

    def ordinal_derivatives(
        self, x: Tensor, cuts: Tensor, level: Tensor, scale: float | Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        r"""Log-probability of ``level`` given ``x`` and its first and negative second
        derivatives in ``x``, for cut points ``cuts`` (module docstring).

        Args:
            x: The latent quantity (a difference or a utility), any shape.
            cuts: ``(k - 1,)`` increasing cut points (differentiable).
            level: Long tensor of levels in ``[0, k - 1]``, broadcastable to ``x`` (entries
                of other rows may hold anything in range; callers mask them).
            scale: The scale ``s`` (a float or a positive tensor broadcastable to ``x``).

        Returns:
            ``(log_p, grad, neg_hess)`` shaped like ``x``.
        """
        k = cuts.shape[-1] + 1
        cuts = cuts.to(x)
        level = level.clamp(0, k - 1).expand_as(x)
        c_lo = cuts[(level - 1).clamp(0, k - 2)]
        c_hi = cuts[level.clamp(0, k - 2)]
        top, bottom = level == k - 1, level == 0
        one_sided = top | bottom
        # end levels: log F((x - c_{k-1})/s) and log F((c_1 - x)/s)
        z = torch.where(top, x - c_lo, c_hi - x) / scale
        lp1, g1, h1 = self._link_terms(z)
        g1 = torch.where(top, g1, -g1)
        if k == 2 or bool(one_sided.all()):  # no middle level: skip its work
            return lp1, g1 / scale, h1 / (scale * scale)
        # middle levels, on the side where a + b <= 0 (safe values at the end levels, whose
        # interval is empty: they never reach a result or a gradient)
        a = (c_hi - x) / scale
        b = (c_lo - x) / scale
        flip = a + b > 0
        a, b = torch.where(flip, -b, a), torch.where(flip, -a, b)
        a = torch.where(one_sided, torch.zeros_like(a), a)
        b = torch.where(one_sided, -torch.ones_like(b), b)
        lp2, dr, h2 = self._interval_terms(a, b)
        g2 = torch.where(flip, dr, -dr)
        log_p = torch.where(one_sided, lp1, lp2)
        grad = torch.where(one_sided, g1, g2) / scale
        neg_hess = torch.where(one_sided, h1, h2) / (scale * scale)
        return log_p, grad, neg_hess

    def graded_derivatives(
        self, delta: Tensor, level: Tensor, scale: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        r"""Log-probability of graded comparisons (levels ``level`` on
        :math:`\delta = f(a) - f(b)`) and derivatives in ``delta``.

        Args:
            delta: Utility differences, any shape.
            level: Levels in ``[0, graded_levels - 1]``, broadcastable to ``delta``.
            scale: Another scale in place of :attr:`scale` (see
                :meth:`~botorch_pref.likelihoods.base.PairwiseLikelihood.derivatives`).

        Returns:
            ``(log_p, grad, neg_hess)`` shaped like ``delta``.
        """
        s = self.scale if scale is None else scale
        return self.ordinal_derivatives(delta, self.graded_thresholds, level, s)

    def rating_derivatives(
        self, utility: Tensor, level: Tensor, scale: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        r"""Log-probability of ratings ``level`` of designs with utility ``utility``, and
        derivatives in ``utility``.

        Args:
            utility: Utilities :math:`f(x)`, any shape.
            level: Levels in ``[0, rating_levels - 1]``, broadcastable to ``utility``.
            scale: Another scale in place of :attr:`rating_scale`, or ``None``.

        Returns:
            ``(log_p, grad, neg_hess)`` shaped like ``utility``.
        """
        s = self.rating_scale if scale is None else scale
        return self.ordinal_derivatives(utility, self.rating_cut_points, level, s)
