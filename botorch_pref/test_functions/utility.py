r"""The base classes of the utilities: :class:`Utility` on the unit cube and utilities on a box.

Every utility maps ``... x d`` unit-cube designs to ``...`` values to maximise, evaluated in
float64, and knows its optimal value, so that :meth:`Utility.regret` can score a recommendation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

__all__ = ["BoxUtility", "Utility", "check_tensor"]


# Inputs may overshoot the unit cube by this much (rounding in upstream arithmetic); they are
# clamped onto the cube before evaluation. Anything further out raises a ValueError.
_CUBE_TOL = 1e-6


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
