r"""The damped-Newton driver every Laplace engine runs.

The Laplace mode maximises the concave objective

.. math::

    \Psi(f) = \log p(\mathcal D \mid f) - \tfrac12 f^\top K^{-1} f .

An engine (:mod:`botorch_pref.inference.engine`) parametrises the utilities by coefficients
(``coef``: :math:`\beta` with :math:`f = K A^\top \beta` in comparison space, :math:`\alpha`
with :math:`f = K\alpha` in design space), so that :math:`f^\top K^{-1} f` is a dot product and
``K`` is never inverted, and supplies three maps: coefficients to a :class:`NewtonState`
(differences :math:`A f`, log-likelihood, prior quadratic), differences to the full Newton
iterate's coefficients, and coefficients to utilities. :func:`damped_newton` then iterates

.. math::

    \text{coef}_{t+1} = \text{coef}_t + 2^{-h}(\text{coef}^{\text{Newton}}_t - \text{coef}_t)

per batch member, with the smallest :math:`h \ge 0` that does not decrease :math:`\Psi`
(backtracking: the full Newton step can overshoot when the answer noise is small), and stops
when :math:`\max_i |f_{t+1,i} - f_{t,i}| \le \text{tol} \cdot \max(1, \max_i |f_{t+1,i}|)` for
every member. The tolerance is dtype-aware (:func:`default_tolerance`).

The full Newton iterate depends on the current point only through the differences :math:`d = A f`
(the likelihood's gradient and curvature are functions of :math:`d`), so a guess of the
differences alone (a previous mode's, or the net-wins guess) yields a starting point: one Newton
step from it. Of several candidate starts each member keeps the one with the highest
:math:`\Psi`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

__all__ = [
    "Form",
    "NewtonState",
    "choose_form",
    "damped_newton",
    "default_tolerance",
    "fit_tolerance",
    "select_state",
]

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


def _relative_change(f_new: Tensor, f: Tensor) -> Tensor:
    return (f_new - f).abs().amax(-1) / f_new.abs().amax(-1).clamp_min(1.0)


def damped_newton(
    state: Callable[[Tensor], NewtonState],
    newton_target: Callable[[Tensor], Tensor],
    to_f: Callable[[Tensor], Tensor],
    starts: list[NewtonState],
    *,
    tol: float,
    max_iter: int,
    max_halvings: int,
) -> tuple[NewtonState, Tensor, int, Tensor]:
    r"""Damped Newton iterations with a per-member backtracking line search on :math:`\Psi`.

    Each iteration takes the full Newton step for every member, then halves the step of the
    members whose objective decreased. The line-search test and the convergence test of an
    iteration are read from the device together, once (a second read happens only in the
    iterations where some member must backtrack), so on a GPU the loop synchronises with the
    host once per iteration. Converged members take harmless extra steps at their fixed point
    while others finish.

    Args:
        state: Maps coefficients (``B x c``) to their :class:`NewtonState`.
        newton_target: Maps differences ``d`` to the full Newton iterate's coefficients.
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
        target = newton_target(current.d)
        step = target - current.coef
        new = state(target)
        worse = _worse(new, current)
        f_new = to_f(new.coef)
        change = _relative_change(f_new, f)
        any_worse, all_done = torch.stack([worse.any(), (change <= tol).all()]).tolist()
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
            change = _relative_change(f_new, f)
            all_done = bool((change <= tol).all())
        current, f = new, f_new
        converged = change <= tol
        if all_done:
            break
    return current, f, iterations, converged
