r"""Classic test functions, negated and seen through the unit cube: Branin, Hartmann, Ackley,
Levy (BoTorch's, wrapped) and Alpine1 (written here)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import ClassVar

import torch
from botorch.test_functions.synthetic import Ackley as _BoTorchAckley
from botorch.test_functions.synthetic import Branin as _BoTorchBranin
from botorch.test_functions.synthetic import Hartmann as _BoTorchHartmann
from botorch.test_functions.synthetic import Levy as _BoTorchLevy
from botorch.test_functions.synthetic import SyntheticTestFunction
from torch import Tensor

from botorch_pref.checks import whole_number
from botorch_pref.test_functions.utility import BoxUtility

__all__ = ["Ackley", "Alpine1", "Branin", "Hartmann", "Levy"]


@contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    r"""Temporarily set torch's default dtype (BoTorch builds some constants with it)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


class _BoTorchUtility(BoxUtility):
    r"""A negated BoTorch ``SyntheticTestFunction``, seen through the unit cube."""

    def __init__(
        self,
        problem: SyntheticTestFunction,
        optimal_value: float,
        domain_optimizers: Sequence[Sequence[float]] | None,
        name: str,
    ) -> None:
        if not problem.negate:
            raise ValueError("The wrapped BoTorch problem must be built with negate=True.")
        self.problem = problem
        bounds = [tuple(float(v) for v in pair) for pair in problem.bounds.T.tolist()]
        super().__init__(bounds, optimal_value, domain_optimizers, name)

    def _evaluate_domain(self, Z: Tensor) -> Tensor:
        if self.problem.bounds.device != Z.device:
            self.problem.to(device=Z.device)
        return self.problem(Z, noise=False)


class Branin(_BoTorchUtility):
    r"""Negated Branin on :math:`[-5, 10] \times [0, 15]`, through the unit cube.

    .. math::
        B(z) = (z_2 - b z_1^2 + c z_1 - r)^2 + s (1 - t) \cos z_1 + s,

    with :math:`b = 5.1 / (4\pi^2)`, :math:`c = 5/\pi`, :math:`r = 6`, :math:`s = 10`,
    :math:`t = 1/(8\pi)`. The utility is :math:`f(x) = -B(z(x))` (``standardize=False``, the
    default) or Picheny et al.'s (2013) standardised version
    :math:`f(x) = -(B(z(x)) - 54.8104) / 51.9496` (mean about 0, variance about 1 under uniform
    inputs). Three global maximisers, :math:`z = (-\pi, 12.275), (\pi, 2.275), (3\pi, 2.475)`,
    where :math:`B = 5/(4\pi)` exactly.

    The raw scale is the default because the project's reference noise calibrations were
    measured on it; the standardised utility calibrates to a Gumbel scale 51.9496 times smaller
    (noise scales scale with the utility).
    """

    _SHIFT: ClassVar[float] = 54.8104
    _SCALE: ClassVar[float] = 51.9496

    def __init__(self, standardize: bool = False) -> None:
        r"""
        Args:
            standardize: If True, use :math:`-(B - 54.8104)/51.9496` instead of :math:`-B`.
        """
        self.standardize = bool(standardize)
        b_min = 5.0 / (4.0 * math.pi)
        opt = -(b_min - self._SHIFT) / self._SCALE if self.standardize else -b_min
        super().__init__(
            _BoTorchBranin(negate=True),
            optimal_value=opt,
            domain_optimizers=[
                (-math.pi, 12.275),
                (math.pi, 2.275),
                (3.0 * math.pi, 2.475),
            ],
            name="branin-standardized" if self.standardize else "branin",
        )

    def _evaluate_domain(self, Z: Tensor) -> Tensor:
        f = super()._evaluate_domain(Z)
        if self.standardize:
            f = (f + self._SHIFT) / self._SCALE
        return f


class Hartmann(_BoTorchUtility):
    r"""Negated Hartmann-3 or Hartmann-6 on its native domain :math:`[0, 1]^d`.

    .. math::
        f(x) = \sum_{i=1}^4 \alpha_i \exp\Big(-\sum_{j=1}^d A_{ij} (x_j - P_{ij})^2\Big).

    The BoTorch function's constants are built in float64 here (BoTorch stores them with
    torch's default dtype, float32 unless changed, which perturbs them at the 1e-8 level).
    The optima were refined once with L-BFGS-B from the published locations, to a gradient
    norm below 1e-7 in float64: :math:`f^* = 3.3223680114155` (d = 6, matching the published
    3.32236801141551) and :math:`f^* = 3.8627797873327` (d = 3; the often-quoted 3.86278214782
    is not attained by these constants).
    """

    _OPTIMA: ClassVar[dict[int, tuple[float, tuple[float, ...]]]] = {
        3: (
            3.862779787332663,
            (0.11458887665509226, 0.5556488946169599, 0.8525469846866686),
        ),
        6: (
            3.3223680114155147,
            (
                0.2016895106017448,
                0.1500106922127445,
                0.47687397362387796,
                0.27533243039345473,
                0.3116516165644498,
                0.6573005340573331,
            ),
        ),
    }

    def __init__(self, dim: int = 6) -> None:
        r"""
        Args:
            dim: 3 or 6.
        """
        if dim not in self._OPTIMA:
            raise ValueError(f"Hartmann is available for dim 3 or 6, got {dim!r}.")
        with _default_dtype(torch.float64):
            problem = _BoTorchHartmann(dim=dim, negate=True)
        value, location = self._OPTIMA[dim]
        super().__init__(problem, value, [location], name=f"hartmann{dim}")


class Ackley(_BoTorchUtility):
    r"""Negated Ackley on :math:`[-2, 2]^d` (the qEUBO paper's domain, ``4 X - 2``).

    .. math::
        f(x) = 20 \exp\Big(-0.2 \sqrt{\tfrac{1}{d} \textstyle\sum_i z_i^2}\Big)
            + \exp\Big(\tfrac{1}{d} \textstyle\sum_i \cos(2\pi z_i)\Big) - 20 - e,
        \quad z = 4x - 2.

    Unique maximiser :math:`z = 0` (:math:`x = 1/2`), :math:`f^* = 0`.

    Args:
        dim: The input dimension, a positive integer (default 6, as in the qEUBO paper).
    """

    def __init__(self, dim: int = 6) -> None:
        dim = whole_number(dim, "dim", 1)
        problem = _BoTorchAckley(dim=dim, negate=True, bounds=[(-2.0, 2.0)] * dim)
        super().__init__(problem, 0.0, [(0.0,) * dim], name=f"ackley{dim}")


class Levy(_BoTorchUtility):
    r"""Negated Levy on :math:`[-10, 10]^d` (``20 X - 10``, as in the qEUBO scripts).

    .. math::
        f(x) = -\Big[\sin^2(\pi w_1) + \sum_{i<d} (w_i - 1)^2 (1 + 10 \sin^2(\pi w_i + 1))
            + (w_d - 1)^2 (1 + \sin^2(2\pi w_d))\Big], \quad w_i = 1 + (z_i - 1)/4.

    Unique maximiser :math:`z = 1` (:math:`x = 0.55`), :math:`f^* = 0`.

    Args:
        dim: The input dimension, a positive integer (default 2).
    """

    def __init__(self, dim: int = 2) -> None:
        dim = whole_number(dim, "dim", 1)
        problem = _BoTorchLevy(dim=dim, negate=True)
        super().__init__(problem, 0.0, [(1.0,) * dim], name=f"levy{dim}")


class Alpine1(BoxUtility):
    r"""Negated Alpine1 on :math:`[-10, 10]^d` (``20 X - 10``, as in the qEUBO scripts).

    .. math::
        f(x) = -\sum_{i=1}^d |z_i \sin z_i + 0.1 z_i|, \quad z = 20 x - 10.

    :math:`f^* = 0`, attained at :math:`z = 0` (:math:`x = 1/2`, the reported optimiser) and at
    every :math:`z` whose coordinates are each 0 or a root of :math:`\sin z = -0.1` (many
    global maximisers). Not differentiable where a summand vanishes.

    Args:
        dim: The input dimension, a positive integer (default 7, as in the qEUBO paper).
    """

    def __init__(self, dim: int = 7) -> None:
        dim = whole_number(dim, "dim", 1)
        super().__init__([(-10.0, 10.0)] * dim, 0.0, [(0.0,) * dim], name=f"alpine1-{dim}")

    def _evaluate_domain(self, Z: Tensor) -> Tensor:
        return -(Z * torch.sin(Z) + 0.1 * Z).abs().sum(dim=-1)
