r"""Expected improvement of a Gaussian difference: the closed form EUBO and champion share.

If :math:`D \sim N(\Delta, t^2)`, then

.. math::

    E[D^+] = \Delta\, \Phi(\Delta / t) + t\, \phi(\Delta / t) = t\, h(\Delta / t), \qquad
    h(u) = \phi(u) + u\, \Phi(u).

For two jointly Gaussian utilities :math:`g_1, g_2` with :math:`D = g_1 - g_2`,
:math:`E[\max(g_1, g_2)] = E[g_2] + E[D^+]`: EUBO is :math:`\mu_2` plus this expected
improvement, and the champion-challenger value is the expected improvement itself.

For :math:`u \ll 0`, :math:`\phi(u) + u \Phi(u)` cancels catastrophically;
:func:`log_expected_improvement` evaluates :math:`\log h(u)` in the stable form of the LogEI
paper (Ament et al., 2023, BoTorch's helper), which keeps full relative accuracy and a non-zero
gradient far into the tail. :func:`expected_improvement` is the plain closed form, for sums such
as EUBO where only absolute accuracy matters.
"""

from __future__ import annotations

import math

import torch
from botorch.acquisition.analytic import _log_ei_helper
from torch import Tensor

__all__ = ["expected_improvement", "expected_improvement_and_slopes", "log_expected_improvement"]

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def expected_improvement(delta: Tensor, t: Tensor) -> Tensor:
    r""":math:`E[D^+] = \Delta\,\Phi(\Delta/t) + t\,\phi(\Delta/t)`, :math:`D \sim N(\Delta, t^2)`.

    Args:
        delta: Means :math:`\Delta`.
        t: Standard deviations :math:`t > 0`, broadcastable with ``delta``.

    Returns:
        The expected improvements.
    """
    return expected_improvement_and_slopes(delta, t)[0]


def expected_improvement_and_slopes(delta: Tensor, t: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    r""":func:`expected_improvement` and its partial derivatives.

    With :math:`u = \Delta / t`, :math:`\partial E[D^+] / \partial \Delta = \Phi(u)` and
    :math:`\partial E[D^+] / \partial t = \phi(u)`.

    Args:
        delta: Means :math:`\Delta`.
        t: Standard deviations :math:`t > 0`, broadcastable with ``delta``.

    Returns:
        ``(value, cdf, pdf)``: :math:`E[D^+]`, :math:`\Phi(u)` and :math:`\phi(u)`.
    """
    u = delta / t
    pdf = _INV_SQRT_2PI * torch.exp(-0.5 * u * u)
    cdf = 0.5 * torch.erfc(-u / math.sqrt(2.0))
    return t * pdf + delta * cdf, cdf, pdf


def log_expected_improvement(delta: Tensor, t: Tensor) -> Tensor:
    r""":math:`\log E[D^+] = \log h(\Delta / t) + \log t`, accurate in the tail.

    Args:
        delta: Means :math:`\Delta`.
        t: Standard deviations :math:`t > 0`, broadcastable with ``delta``.

    Returns:
        The log expected improvements.
    """
    return _log_ei_helper(delta / t) + t.log()
