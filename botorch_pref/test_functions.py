r"""Utilities to maximise on the unit cube, for benchmarking preferential BO.

Every utility :math:`f: [0, 1]^d \to \mathbb{R}` here is a function to MAXIMISE whose inputs
live in the unit cube. Functions that are usually stated on another box (Branin on
:math:`[-5, 10] \times [0, 15]`, Ackley on :math:`[-2, 2]^6`, ...) are composed with the affine map
:math:`x \mapsto l + (u - l) x` from the unit cube onto that box, and functions that are usually
minimised are negated. Each utility knows its optimal value (and the unit-cube location of an
optimiser), so that the regret :math:`f^* - f(x)` of a recommendation can be reported.

Where BoTorch has the function (``botorch.test_functions.synthetic``: Branin, Hartmann, Ackley,
Levy) it is wrapped with ``negate=True``; Alpine1 and the 1-D two-bump function are written here.

Domains follow the qEUBO paper (Astudillo et al., 2023, "qEUBO: a decision-theoretic acquisition
function for preferential Bayesian optimization", AISTATS) and its public experiment scripts,
which map the unit cube as ``X_unnorm = 4 X - 2`` for Ackley (d = 6), ``20 X - 10`` for Alpine1
(d = 7) and ``20 X - 10`` for Levy, and use Hartmann-6 on its native :math:`[0, 1]^6`.

All evaluations are carried out in float64 (the result is cast back to the input's dtype and
lives on the input's device), so that a float32 call never perturbs the constants the functions
are built from.

Example:
    >>> f = get_utility("hartmann6")
    >>> X = torch.rand(5, 6, dtype=torch.float64)
    >>> f(X).shape, f.regret(X).min() >= 0
    (torch.Size([5]), tensor(True))
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import torch
from botorch.test_functions.synthetic import (
    Ackley as _BoTorchAckley,
)
from botorch.test_functions.synthetic import (
    Branin as _BoTorchBranin,
)
from botorch.test_functions.synthetic import (
    Hartmann as _BoTorchHartmann,
)
from botorch.test_functions.synthetic import (
    Levy as _BoTorchLevy,
)
from botorch.test_functions.synthetic import (
    SyntheticTestFunction,
)
from torch import Tensor

__all__ = [
    "Ackley",
    "Alpine1",
    "Branin",
    "Embedded",
    "Hartmann",
    "Levy",
    "TwoBump",
    "Utility",
    "check_tensor",
    "get_utility",
    "list_utilities",
]

# Inputs may overshoot the unit cube by this much (rounding in upstream arithmetic); they are
# clamped onto the cube before evaluation. Anything further out raises a ValueError.
_CUBE_TOL = 1e-6


@contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    r"""Temporarily set torch's default dtype (BoTorch builds some constants with it)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def check_tensor(X: Any, min_dim: int, dim: int | None, shape: str) -> Tensor:
    """``X`` if it is a tensor of at least ``min_dim`` dimensions (and ``dim`` columns).

    Args:
        X: The input.
        min_dim: The least number of dimensions.
        dim: The required size of the last dimension (``None``: any).
        shape: The start of the error message for a wrong shape (the shape is appended).

    Raises:
        TypeError: If ``X`` is not a tensor.
        ValueError: If its shape does not fit.
    """
    if not isinstance(X, Tensor):
        raise TypeError(f"X must be a torch.Tensor, got {type(X).__name__}.")
    if X.dim() < min_dim or (dim is not None and X.shape[-1] != dim):
        raise ValueError(f"{shape}, got {tuple(X.shape)}.")
    return X


class Utility(ABC):
    r"""Base class for a utility to maximise on the unit cube :math:`[0, 1]^d`.

    Subclasses implement :meth:`_evaluate` on float64 inputs already validated to lie in the
    unit cube; :meth:`__call__` handles validation, dtype and device.

    Attributes:
        dim: The input dimension :math:`d`.
        name: A short name, accepted by :func:`get_utility`.
        optimal_value: The global maximum :math:`f^* = \max_{x \in [0,1]^d} f(x)`.
        optimizers: A ``k x d`` float64 tensor of known global maximisers in the unit cube, or
            ``None`` if none is known.
    """

    dim: int
    name: str
    optimal_value: float
    optimizers: Tensor | None

    def __init__(
        self,
        dim: int,
        optimal_value: float,
        optimizers: Sequence[Sequence[float]] | Tensor | None,
        name: str,
    ) -> None:
        r"""
        Args:
            dim: The input dimension :math:`d \ge 1`.
            optimal_value: The global maximum of the utility on the unit cube.
            optimizers: Known global maximisers (unit-cube coordinates), ``k x d``, or ``None``.
            name: A short name for the utility.
        """
        if int(dim) != dim or dim < 1:
            raise ValueError(f"dim must be a positive integer, got {dim!r}.")
        self.dim = int(dim)
        self.optimal_value = float(optimal_value)
        if optimizers is not None:
            opt = torch.as_tensor(optimizers, dtype=torch.float64).reshape(-1, self.dim)
            optimizers = opt.clone()
        self.optimizers = optimizers
        self.name = name

    @property
    def optimizer(self) -> Tensor | None:
        r"""One global maximiser (a ``d``-dim float64 tensor in the unit cube), or ``None``."""
        return None if self.optimizers is None else self.optimizers[0]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, dim={self.dim})"

    def _check_input(self, X: Tensor) -> Tensor:
        r"""Validate ``X`` (``... x d``, floating, in the unit cube); clamp rounding overshoot."""
        shape = f"{self.name} expects inputs of shape `... x {self.dim}`"
        check_tensor(X, 1, self.dim, shape)
        if not X.is_floating_point():
            raise ValueError(f"X must have a floating dtype, got {X.dtype}.")
        if X.numel() > 0:
            lo, hi = X.min().item(), X.max().item()
            if not (lo >= -_CUBE_TOL and hi <= 1.0 + _CUBE_TOL):
                raise ValueError(
                    f"{self.name} is defined on the unit cube [0, 1]^{self.dim}; "
                    f"got inputs in [{lo}, {hi}]."
                )
        return X.clamp(0.0, 1.0)

    def __call__(self, X: Tensor) -> Tensor:
        r"""Evaluate the utility.

        Args:
            X: A ``... x d`` tensor of points in the unit cube.

        Returns:
            A ``...`` tensor of utilities, with ``X``'s dtype and device (computed in float64).
        """
        Xc = self._check_input(X)
        return self._evaluate(Xc.to(torch.float64)).to(X.dtype)

    @abstractmethod
    def _evaluate(self, X: Tensor) -> Tensor:
        r"""Evaluate on a validated float64 ``... x d`` tensor in the unit cube; return ``...``."""

    def regret(self, X: Tensor) -> Tensor:
        r"""The simple regret :math:`r(x) = f^* - f(x) \ge 0`.

        Rounding can make :math:`f(x)` exceed :math:`f^*` by a few ulps at (or next to) an
        optimiser; such tiny negative values, down to
        :math:`-\max(10^{-6}, 100\,\epsilon) \max(1, |f^*|)` with :math:`\epsilon` the machine
        epsilon of ``X``'s dtype, are set to zero, so that :math:`\log_{10} r` is never NaN.
        A more negative regret means the stated optimum is wrong and raises a RuntimeError
        rather than being hidden by clamping.

        Args:
            X: A ``... x d`` tensor of points in the unit cube.

        Returns:
            A ``...`` tensor of non-negative regrets, with ``X``'s dtype and device.
        """
        r = self.optimal_value - self(X)
        eps = torch.finfo(r.dtype).eps
        tol = max(1e-6, 100.0 * eps) * max(1.0, abs(self.optimal_value))
        if r.numel() > 0 and r.min().item() < -tol:
            raise RuntimeError(
                f"{self.name}: a point beats the stated optimal value {self.optimal_value} by "
                f"{-r.min().item():.3g}; the optimum is wrong."
            )
        return r.clamp_min(0.0)


class BoxUtility(Utility):
    r"""A utility defined on a box :math:`[l, u] \subset \mathbb{R}^d`, seen through the cube.

    :math:`f(x) = g(l + (u - l) \odot x)` for :math:`x \in [0, 1]^d`, where :math:`g` is
    :meth:`_evaluate_domain`. Subclasses state ``bounds`` and optimisers in the original domain.
    """

    bounds: Tensor

    def __init__(
        self,
        bounds: Sequence[tuple[float, float]],
        optimal_value: float,
        domain_optimizers: Sequence[Sequence[float]] | None,
        name: str,
    ) -> None:
        r"""
        Args:
            bounds: ``d`` pairs ``(l_i, u_i)`` with ``l_i < u_i``: the original domain.
            optimal_value: The global maximum on the box.
            domain_optimizers: Known global maximisers in ORIGINAL coordinates, ``k x d``.
            name: A short name for the utility.
        """
        b = torch.tensor(list(bounds), dtype=torch.float64).reshape(-1, 2).T.contiguous()
        if not bool((b[1] > b[0]).all()):
            raise ValueError(f"Each bound must satisfy lower < upper, got {list(bounds)}.")
        self.bounds = b
        optimizers = None
        if domain_optimizers is not None:
            opt = torch.tensor(domain_optimizers, dtype=torch.float64).reshape(-1, b.shape[1])
            optimizers = ((opt - b[0]) / (b[1] - b[0])).clamp(0.0, 1.0)
        super().__init__(b.shape[1], optimal_value, optimizers, name)

    def unnormalize(self, X: Tensor) -> Tensor:
        r"""Map unit-cube points onto the original box: :math:`l + (u - l) \odot x`, clamped."""
        b = self.bounds.to(device=X.device, dtype=X.dtype)
        return torch.minimum(torch.maximum(b[0] + (b[1] - b[0]) * X, b[0]), b[1])

    def _evaluate(self, X: Tensor) -> Tensor:
        return self._evaluate_domain(self.unnormalize(X))

    @abstractmethod
    def _evaluate_domain(self, Z: Tensor) -> Tensor:
        r"""Evaluate on float64 points ``Z`` (``... x d``) of the original box; return ``...``."""


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
    """

    def __init__(self, dim: int = 6) -> None:
        r"""
        Args:
            dim: The input dimension (default 6, as in the qEUBO paper).
        """
        problem = _BoTorchAckley(dim=dim, negate=True, bounds=[(-2.0, 2.0)] * dim)
        super().__init__(problem, 0.0, [(0.0,) * dim], name=f"ackley{dim}")


class Levy(_BoTorchUtility):
    r"""Negated Levy on :math:`[-10, 10]^d` (``20 X - 10``, as in the qEUBO scripts).

    .. math::
        f(x) = -\Big[\sin^2(\pi w_1) + \sum_{i<d} (w_i - 1)^2 (1 + 10 \sin^2(\pi w_i + 1))
            + (w_d - 1)^2 (1 + \sin^2(2\pi w_d))\Big], \quad w_i = 1 + (z_i - 1)/4.

    Unique maximiser :math:`z = 1` (:math:`x = 0.55`), :math:`f^* = 0`.
    """

    def __init__(self, dim: int = 2) -> None:
        r"""
        Args:
            dim: The input dimension (default 2).
        """
        problem = _BoTorchLevy(dim=dim, negate=True)
        super().__init__(problem, 0.0, [(1.0,) * dim], name=f"levy{dim}")


class Alpine1(BoxUtility):
    r"""Negated Alpine1 on :math:`[-10, 10]^d` (``20 X - 10``, as in the qEUBO scripts).

    .. math::
        f(x) = -\sum_{i=1}^d |z_i \sin z_i + 0.1 z_i|, \quad z = 20 x - 10.

    :math:`f^* = 0`, attained at :math:`z = 0` (:math:`x = 1/2`, the reported optimiser) and at
    every :math:`z` whose coordinates are each 0 or a root of :math:`\sin z = -0.1` (many
    global maximisers). Not differentiable where a summand vanishes.
    """

    def __init__(self, dim: int = 7) -> None:
        r"""
        Args:
            dim: The input dimension (default 7, as in the qEUBO paper).
        """
        super().__init__([(-10.0, 10.0)] * dim, 0.0, [(0.0,) * dim], name=f"alpine1-{dim}")

    def _evaluate_domain(self, Z: Tensor) -> Tensor:
        return -(Z * torch.sin(Z) + 0.1 * Z).abs().sum(dim=-1)


def _two_bump_parts(
    x: float, bumps: Sequence[tuple[float, float, float]]
) -> tuple[float, float, float]:
    r"""Value, first and second derivative of :math:`\sum_k h_k \exp(-(x-c_k)^2/(2 w_k^2))`."""
    f = df = d2f = 0.0
    for h, c, w in bumps:
        e = h * math.exp(-((x - c) ** 2) / (2.0 * w * w))
        f += e
        df += -(x - c) / (w * w) * e
        d2f += ((x - c) ** 2 / w**4 - 1.0 / (w * w)) * e
    return f, df, d2f


def _newton_max(x: float, bumps: Sequence[tuple[float, float, float]]) -> float:
    r"""Newton's method on :math:`f'(x) = 0` from ``x``; returns the local maximiser."""
    for _ in range(100):
        _, df, d2f = _two_bump_parts(x, bumps)
        if d2f >= 0:  # pragma: no cover - guarded by the fixed constants of TwoBump
            raise RuntimeError("Newton's method left the concave region of a bump.")
        step = df / d2f
        x -= step
        if abs(step) < 1e-15:
            break
    return x


class TwoBump(Utility):
    r"""A 1-D utility on :math:`[0, 1]` with a narrow global and a broad local maximum.

    .. math::
        f(x) = \exp\Big(-\frac{(x - 0.7)^2}{2 \cdot 0.06^2}\Big)
            + 0.75 \exp\Big(-\frac{(x - 0.25)^2}{2 \cdot 0.12^2}\Big).

    The global maximum is near :math:`x = 0.7` (height about 1.0007); the local one near
    :math:`x = 0.25` (height about 0.75) has the wider basin of attraction, which makes the
    function a small test of exploration. Both maximisers are computed once, at import, by
    Newton's method on the closed-form derivative, to machine precision; they are exposed as
    ``optimizer`` / ``optimal_value`` and ``local_optimizer`` / ``local_optimal_value``.
    """

    BUMPS: ClassVar[tuple[tuple[float, float, float], ...]] = ((1.0, 0.7, 0.06), (0.75, 0.25, 0.12))

    def __init__(self) -> None:
        x_glob = _newton_max(self.BUMPS[0][1], self.BUMPS)
        x_loc = _newton_max(self.BUMPS[1][1], self.BUMPS)
        f_glob = _two_bump_parts(x_glob, self.BUMPS)[0]
        f_loc = _two_bump_parts(x_loc, self.BUMPS)[0]
        super().__init__(1, f_glob, [[x_glob]], name="two-bump")
        self.local_optimizer = torch.tensor([x_loc], dtype=torch.float64)
        self.local_optimal_value = f_loc

    def _evaluate(self, X: Tensor) -> Tensor:
        x = X[..., 0]
        out = torch.zeros_like(x)
        for h, c, w in self.BUMPS:
            out = out + h * torch.exp(-((x - c) ** 2) / (2.0 * w * w))
        return out


class Embedded(Utility):
    r"""A utility hidden in a higher dimension: :math:`f(x) = g(x_{\mathcal{A}})`.

    Only the ``base.dim`` active inputs :math:`\mathcal{A}` matter; the other ``dim - base.dim``
    inputs are ignored. The active positions are ``active_dims`` if given, else a random subset
    drawn with ``seed`` if given, else the first ``base.dim`` positions. The optimal value is the
    base's; the reported optimiser puts the base optimiser at the active positions and 1/2 at the
    inactive ones (any value there is optimal too).
    """

    def __init__(
        self,
        base: Utility,
        dim: int,
        active_dims: Sequence[int] | None = None,
        seed: int | None = None,
    ) -> None:
        r"""
        Args:
            base: The utility of the active inputs.
            dim: The total input dimension, ``>= base.dim``.
            active_dims: ``base.dim`` distinct indices in ``[0, dim)``, in the order the base
                reads them. Mutually exclusive with ``seed``.
            seed: Draw the active positions at random (sorted) with this seed.
        """
        if int(dim) != dim or dim < base.dim:
            raise ValueError(f"dim must be an integer >= base.dim = {base.dim}, got {dim!r}.")
        dim = int(dim)
        if active_dims is not None and seed is not None:
            raise ValueError("Give at most one of active_dims and seed.")
        if active_dims is not None:
            active = [int(i) for i in active_dims]
            if len(active) != base.dim or len(set(active)) != len(active):
                raise ValueError(
                    f"active_dims must hold {base.dim} distinct indices, got {list(active_dims)}."
                )
            if min(active) < 0 or max(active) >= dim:
                raise ValueError(f"active_dims must lie in [0, {dim}), got {active}.")
        elif seed is not None:
            g = torch.Generator().manual_seed(int(seed))
            active = sorted(torch.randperm(dim, generator=g)[: base.dim].tolist())
        else:
            active = list(range(base.dim))
        self.base = base
        self.active_dims = active
        self.inactive_dims = [i for i in range(dim) if i not in set(active)]
        optimizers = None
        if base.optimizers is not None:
            optimizers = torch.full((base.optimizers.shape[0], dim), 0.5, dtype=torch.float64)
            optimizers[:, active] = base.optimizers
        super().__init__(dim, base.optimal_value, optimizers, name=f"{base.name}-in-{dim}")

    def _evaluate(self, X: Tensor) -> Tensor:
        return self.base._evaluate(X[..., self.active_dims])


_FIXED: dict[str, Callable[..., Utility]] = {
    "branin": lambda **kw: Branin(**kw),
    "branin-standardized": lambda **kw: Branin(standardize=True, **kw),
    "hartmann3": lambda **kw: Hartmann(dim=3, **kw),
    "hartmann6": lambda **kw: Hartmann(dim=6, **kw),
    "ackley6": lambda **kw: Ackley(dim=6, **kw),
    "alpine1-7": lambda **kw: Alpine1(dim=7, **kw),
    "levy": lambda **kw: Levy(**kw),
    "two-bump": lambda **kw: TwoBump(**kw),
    "hartmann6-in-20": lambda **kw: Embedded(Hartmann(dim=6), 20, **kw),
}

_PATTERNS: list[tuple[str, Callable[..., Utility]]] = [
    (r"ackley(\d+)", lambda d, **kw: Ackley(dim=int(d), **kw)),
    (r"alpine1-(\d+)", lambda d, **kw: Alpine1(dim=int(d), **kw)),
    (r"levy(\d+)", lambda d, **kw: Levy(dim=int(d), **kw)),
]


def list_utilities() -> list[str]:
    r"""The names :func:`get_utility` accepts: fixed names, then name patterns."""
    return [
        *_FIXED,
        "ackley<d>",
        "alpine1-<d>",
        "levy<d>",
        "<name>-in-<D>",
    ]


def get_utility(name: str, **kwargs: Any) -> Utility:
    r"""Build a utility by name.

    Fixed names: ``branin``, ``branin-standardized``, ``hartmann3``, ``hartmann6``, ``ackley6``,
    ``alpine1-7``, ``levy`` (``dim`` keyword, default 2), ``two-bump``, ``hartmann6-in-20``.
    Patterns: ``ackley<d>``, ``alpine1-<d>``, ``levy<d>`` and ``<name>-in-<D>`` (the utility
    ``<name>`` embedded in ``D`` dimensions; keywords go to :class:`Embedded`, e.g. ``seed``).
    Every utility's ``name`` is accepted, so ``get_utility(f.name)`` rebuilds ``f``. Names are
    case-insensitive.

    Args:
        name: The utility's name.
        **kwargs: Passed to the constructor.

    Returns:
        The utility.

    Raises:
        ValueError: For an unknown name (the message lists the valid ones).
    """
    key = name.strip().lower()
    if key in _FIXED:
        return _FIXED[key](**kwargs)
    for pattern, factory in _PATTERNS:
        m = re.fullmatch(pattern, key)
        if m:
            return factory(*m.groups(), **kwargs)
    m = re.fullmatch(r"(.+)-in-(\d+)", key)
    if m:
        try:
            base = get_utility(m.group(1))
        except ValueError:
            pass
        else:
            return Embedded(base, int(m.group(2)), **kwargs)
    raise ValueError(f"Unknown utility {name!r}. Valid names: {', '.join(list_utilities())}.")
