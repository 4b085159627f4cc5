"""Small data generators and readers shared by the tests."""

from __future__ import annotations

import sqlite3

import torch

#: A two-parameter session and settings that never fit (random queries): fast session tests.
SESSION_PARAMS = [("x", 0.0, 1.0), ("y", -2.0, 3.0)]
SESSION_FAST = {"strategy": "random", "seed": 3, "refit_all_until": 0, "refit_every": 10**6}


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


def optimizer_run(problem: str, seed: int, steps: int, scale: float = 0.1, **settings):
    """A :class:`~botorch_pref.PreferenceOptimizer` on the unit cube answered by a Gumbel user.

    Both are seeded ``seed`` (the protocol of ``run_replications``'s replication ``seed``).

    Returns:
        ``(optimizer, queries, winners, recommendations)``: the ``steps x q x d`` queries, the
        ``steps`` answers and the ``steps x d`` recommendations after each answer.
    """
    from botorch_pref import PreferenceOptimizer
    from botorch_pref.test_functions import get_utility
    from botorch_pref.users import SimulatedUser

    utility = get_utility(problem)
    d = utility.dim
    user = SimulatedUser(utility, noise="gumbel", scale=scale, seed=seed)
    bounds = torch.stack([torch.zeros(d), torch.ones(d)]).to(torch.float64)
    opt = PreferenceOptimizer(bounds, seed=seed, **settings)
    queries, winners, best = [], [], []
    for _ in range(steps):
        X = opt.ask()
        w = int(user.choose(X))
        opt.tell(X, w)
        queries.append(X)
        winners.append(w)
        best.append(opt.best().x)
    return opt, torch.stack(queries), torch.tensor(winners), torch.stack(best)


def snapshot(path) -> tuple:
    """Everything stored, read with plain SQL."""
    con = sqlite3.connect(path)
    out = tuple(
        tuple(con.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall())
        for t in ("sessions", "queries", "designs", "answers", "retractions")
    )
    con.close()
    return out
