r"""Utilities built here: the 1-D two-bump function and a utility embedded in more dimensions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import torch
from torch import Tensor

from botorch_pref.test_functions.utility import Utility

__all__ = ["Embedded", "TwoBump"]


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
