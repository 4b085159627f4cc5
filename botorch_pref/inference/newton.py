r"""The damped-Newton driver every Laplace engine runs.

The Laplace mode maximises the concave objective

.. math::

    \Psi(f) = \log p(\mathcal D \mid f) - \tfrac12 f^\top K^{-1} f .

An engine (:mod:`botorch_pref.inference.engine`) parametrises the utilities by coefficients
(``coef``: :math:`\beta` with :math:`f = K A^\top \beta` in comparison space, :math:`\alpha`
with :math:`f = K\alpha` in design space), so that :math:`f^\top K^{-1} f` is a dot product and
``K`` is never inverted, and supplies the maps of :class:`NewtonMaps`: coefficients to a
:class:`NewtonState` (differences :math:`A f`, log-likelihood, prior quadratic), a state to its
full Newton step, and coefficients to utilities. :func:`damped_newton` then iterates

.. math::

    \text{coef}_{t+1} = \text{coef}_t + 2^{-h}\,\Delta_t

per batch member, with the smallest :math:`h \ge 0` that does not decrease :math:`\Psi`
(backtracking: the full Newton step can overshoot when the answer noise is small).

**The step is a correction solved from the gradient.** With the gradient's coefficients
:math:`\rho = g(d) - \beta` (comparison space, :math:`\nabla_f \Psi = A^\top \rho`) or
:math:`\rho = A^\top g(d) - \alpha` (design space, :math:`\nabla_f \Psi = \rho`), the Newton step
solves the same system as the Newton iterate itself, with :math:`\rho` on the right-hand side
instead of :math:`c = H d + g`. The two are equal in exact arithmetic, but near the mode
:math:`\rho` is small while :math:`c` is large when answers are consistent (``H d`` grows like
the inverse noise variance), so the iterate formed from ``c`` carries a rounding error of
:math:`\epsilon |c|` that the product with ``K`` amplifies: in float32 at large prior-to-noise
ratios it spoils the step. The step from :math:`\rho` has an error of :math:`\epsilon |\rho|`,
which vanishes at the mode.

**Stopping.** A member has converged when its *full* step (:math:`h = 0`) moves the utilities
by at most :math:`\text{tol} \cdot \max(1, \max_i |f^{\text{Newton}}_{i}|)` (a dtype-aware
``tol``, :func:`default_tolerance`), or when the computed :math:`\Psi` can no longer judge the
step. The step's predicted gain is half its Newton decrement,
:math:`\lambda^2 = \nabla_f\Psi^\top \Delta f = \Delta f^\top (K^{-1} + W) \Delta f`; with
:math:`u = \epsilon \max(1, |\Psi|)` the rounding unit of :math:`\Psi`:

* :math:`\lambda^2 / 2 \le u`: the step is taken without the line search (which cannot see
  so small a gain) and is the last one; Newton converges quadratically from there;
* the line search rejects the step and :math:`\lambda^2 / 2 \le` :data:`PSI_ROUNDING`
  :math:`\cdot\, u`: the rejection lies within the rounding of :math:`\Psi`, the floor of the
  dtype; the member stops where it is.

In float64 these floors lie far below ``tol``. In float32 the full step near the mode is
rounding noise that can exceed ``tol``, and they end the iteration there. A backtracked step
is never taken for convergence: the line search can halve a step that rounding spoilt to almost
nothing, which moves ``f`` by less than the tolerance at a point that is not the mode (the
decrement of such a step is not small, so neither floor applies).

The Newton iterate from a point depends on the point only through its differences
:math:`d = A f` (the likelihood's gradient and curvature are functions of :math:`d`), so a guess
of the differences alone (a previous mode's, or the net-wins guess) yields a starting point: the
iterate formed from ``c`` at it (:attr:`NewtonMaps.start`). Of several candidate starts each
member keeps the one with the highest :math:`\Psi`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch
from torch import Tensor

__all__ = [
    "Form",
    "NewtonMaps",
    "NewtonState",
    "choose_form",
    "damped_newton",
    "default_tolerance",
    "fit_tolerance",
    "select_state",
]

#: The space a Laplace system is solved in: ``"comparison"`` (``p x p``, ``B = I + R K R^T``)
#: or ``"design"`` (``n x n``, ``I + L^T W L``); the smaller one is chosen.
Form = Literal["comparison", "design"]


def choose_form(n: int, r: int) -> Form:
    """The smaller Newton system: comparison space (``r x r``) unless ``r > n``.

    Ties go to comparison space, which needs no jitter.

    Args:
        n: Number of designs.
        r: Number of difference rows.

    Returns:
        ``"comparison"`` or ``"design"``.
    """
    return "comparison" if r <= n else "design"


def default_tolerance(dtype: torch.dtype) -> float:
    """Newton stopping tolerance on ``max |f_new - f|`` (relative to ``max(1, |f|)``)."""
    return 1e-9 if dtype == torch.float64 else 2e-5


def fit_tolerance(dtype: torch.dtype) -> float:
    """Looser tolerance for the mode inside an evidence evaluation.

    The evidence takes one more Newton step from the mode, which squares its error; the
    hyperparameter gradient's relative error is of the order of this tolerance.
    """
    return 1e-6 if dtype == torch.float64 else 2e-5


@dataclass
class NewtonState:
    r"""A point of the Newton iteration, per batch member.

    Attributes:
        coef: ``B x c`` coefficients (:math:`\beta` or :math:`\alpha`).
        d: ``B x r`` row differences :math:`A f`.
        log_lik: ``B`` log-likelihood at ``d``.
        quad: ``B`` prior quadratic :math:`f^\top K^{-1} f`.
    """

    coef: Tensor
    d: Tensor
    log_lik: Tensor
    quad: Tensor

    @property
    def psi(self) -> Tensor:
        r"""The objective :math:`\Psi = \log p - f^\top K^{-1} f / 2` (``B``)."""
        return self.log_lik - 0.5 * self.quad


class NewtonMaps(NamedTuple):
    r"""The maps of one Laplace system that :func:`damped_newton` iterates on.

    Attributes:
        state: Coefficients (``B x c``) to their :class:`NewtonState`.
        step: A state to its full Newton step in the coefficients and its Newton decrement
            :math:`\lambda^2 = \nabla\Psi^\top \Delta f` (``B``), solved from the gradient
            :math:`\nabla\Psi` (a correction to the current point).
        start: Row differences ``d`` (``B x r``) to the Newton iterate's coefficients from a
            point with those differences (a start from a guess of ``d`` alone).
        to_f: Coefficients to the utilities ``f`` (``B x n``).
    """

    state: Callable[[Tensor], NewtonState]
    step: Callable[[NewtonState], tuple[Tensor, Tensor]]
    start: Callable[[Tensor], Tensor]
    to_f: Callable[[Tensor], Tensor]


def select_state(mask: Tensor, a: NewtonState, b: NewtonState) -> NewtonState:
    """Per batch member: ``a`` where ``mask`` (``B`` bool) else ``b``."""
    m = mask.unsqueeze(-1)
    return NewtonState(
        torch.where(m, a.coef, b.coef),
        torch.where(m, a.d, b.d),
        torch.where(mask, a.log_lik, b.log_lik),
        torch.where(mask, a.quad, b.quad),
    )


def _worse(new: NewtonState, current: NewtonState) -> Tensor:
    """Members whose objective decreased (beyond a relative round-off margin)."""
    return new.psi < current.psi - 1e-12 * current.psi.abs().clamp_min(1.0)


#: How far a computed :math:`\Psi` can be off, in units of ``eps * max(1, |Psi|)``: it sums a
#: log-likelihood term per answer and the prior quadratic, each rounded, so in float32 a step
#: that raises the true value by a few units can lower the computed one.
PSI_ROUNDING = 64.0


def _unresolvable(decrement: Tensor, psi: Tensor, rounding: float = 1.0) -> Tensor:
    r"""Members whose full Newton step would raise :math:`\Psi` by less than ``rounding`` units.

    The step's predicted gain is half the Newton decrement, :math:`\lambda^2 / 2`, with
    :math:`\lambda^2 = \Delta f^\top (K^{-1} + W) \Delta f`; a unit is
    :math:`\epsilon \max(1, |\Psi|)`. As :math:`K^{-1} + W` is the Laplace posterior's
    precision, the step is :math:`\lambda` posterior standard deviations long.
    """
    eps = torch.finfo(psi.dtype).eps
    # |.|: lambda^2 >= 0 in exact arithmetic; a markedly negative one is a spoilt step
    return 0.5 * decrement.abs() <= rounding * eps * psi.abs().clamp_min(1.0)


def _relative_change(f_new: Tensor, f: Tensor) -> Tensor:
    return (f_new - f).abs().amax(-1) / f_new.abs().amax(-1).clamp_min(1.0)


def damped_newton(
    state: Callable[[Tensor], NewtonState],
    newton_step: Callable[[NewtonState], tuple[Tensor, Tensor]],
    to_f: Callable[[Tensor], Tensor],
    starts: list[NewtonState],
    *,
    tol: float,
    max_iter: int,
    max_halvings: int,
) -> tuple[NewtonState, Tensor, int, Tensor]:
    r"""Damped Newton iterations with a per-member backtracking line search on :math:`\Psi`.

    Each iteration takes the full Newton step for every member, then halves the step of the
    members whose objective decreased. A member has converged when its *full* step moves ``f``
    by at most ``tol`` (relative) or when the computed :math:`\Psi` can no longer judge the step
    (the module docstring's two floors); a backtracked step never counts. The
    line-search test and the convergence test of an iteration are read from the device
    together, once (a second read happens only in the iterations where some member must
    backtrack), so on a GPU the loop synchronises with the host once per iteration. Converged
    members take harmless extra steps at their fixed point while others finish.

    Args:
        state: Maps coefficients (``B x c``) to their :class:`NewtonState`.
        newton_step: Maps a state to its full Newton step in the coefficients (``B x c``) and
            its Newton decrement :math:`\lambda^2` (``B``).
        to_f: Maps coefficients to the utilities ``f`` (``B x n``).
        starts: Candidate starting states; each member starts from its best (highest
            :math:`\Psi`) candidate.
        tol: Stopping tolerance on ``max |f_new - f| / max(1, max |f|)``.
        max_iter: Maximum iterations.
        max_halvings: Maximum step halvings per line search.

    Returns:
        ``(state, f, iterations, converged)``.
    """
    current = starts[0]
    for start in starts[1:]:
        current = select_state(start.psi > current.psi, start, current)
    converged = torch.zeros(current.coef.shape[0], dtype=torch.bool, device=current.coef.device)
    f = to_f(current.coef)
    iterations = 0
    for iterations in range(1, max_iter + 1):  # noqa: B007
        step, decrement = newton_step(current)
        new = state(current.coef + step)
        # A step whose gain is below one unit of Psi's rounding is taken as it is (the line
        # search could not judge it) and is the last one: Newton is quadratic from there. A
        # step rejected by less than Psi's rounding marks the floor of the dtype.
        settled = _unresolvable(decrement, current.psi)
        worse = _worse(new, current) & ~settled
        floor = worse & _unresolvable(decrement, current.psi, PSI_ROUNDING)
        f_new = to_f(new.coef)
        converged = (_relative_change(f_new, f) <= tol) | settled | floor
        any_worse, all_done = torch.stack([worse.any(), converged.all()]).tolist()
        if any_worse:  # backtrack the members whose objective decreased
            scale = torch.ones_like(current.psi)
            for _ in range(max_halvings):
                scale = torch.where(worse, 0.5 * scale, scale)
                trial = state(current.coef + scale.unsqueeze(-1) * step)
                new = select_state(worse, trial, new)
                worse = _worse(new, current)
                if not bool(worse.any()):
                    break
            f_new = to_f(new.coef)
        current, f = new, f_new
        if all_done:
            break
    return current, f, iterations, converged
