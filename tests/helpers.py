"""Small data generators shared by the tests."""

from __future__ import annotations

import torch


def random_comparisons(
    n: int,
    m: int,
    d: int = 2,
    noise: float = 0.5,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    utility=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random designs in the unit cube and ``m`` noisy answers about random distinct pairs."""
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=gen, dtype=torch.float64)
    if utility is None:
        u = -((X - 0.3) ** 2).sum(-1) * 4.0
    else:
        u = utility(X)
    i = torch.randint(n, (m,), generator=gen)
    j = (i + torch.randint(1, n, (m,), generator=gen)) % n
    noisy = noise * torch.randn(m, 2, generator=gen, dtype=torch.float64)
    win = torch.where(u[i] + noisy[:, 0] > u[j] + noisy[:, 1], i, j)
    lose = torch.where(win == i, j, i)
    return X.to(dtype), torch.stack([win, lose], -1)
