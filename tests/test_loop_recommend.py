"""Recommendations of the loop: the best compared design, or the posterior-mean maximiser."""

from __future__ import annotations

import pytest
import torch

from botorch_pref import PreferenceOptimizer

DT = torch.float64
BOUNDS = torch.tensor([[-1.0, 0.0], [1.0, 10.0]], dtype=DT)
TARGET = torch.tensor([0.3, 0.6], dtype=DT)  # unit-cube optimum of the test person


def _run(seed: int, n: int = 8) -> PreferenceOptimizer:
    opt = PreferenceOptimizer(BOUNDS, strategy="random", seed=seed)
    for _ in range(n):
        X = opt.ask()
        opt.tell(X, int((opt.to_unit(X) - TARGET).square().sum(-1).argmin()))
    return opt


def test_best_anywhere_has_at_least_the_best_compared_mean_and_is_replayable():
    opt = _run(seed=3)
    compared = opt.best()
    anywhere = opt.best(among="anywhere")
    assert anywhere.mean >= compared.mean - 1e-9
    assert anywhere.x.shape == (2,)
    assert bool(((anywhere.x >= BOUNDS[0]) & (anywhere.x <= BOUNDS[1])).all())
    with torch.no_grad():
        post = opt.model.posterior(opt.to_unit(anywhere.x).reshape(1, 1, 2))
    assert float(post.mean) == pytest.approx(anywhere.mean)
    if anywhere.index is not None:
        assert torch.equal(opt.datapoints[anywhere.index], anywhere.x)
    again = _run(seed=3).best(among="anywhere")
    assert torch.equal(again.x, anywhere.x)  # seeded: the same answers give the same design


def test_best_rejects_an_unknown_set_and_needs_answers():
    opt = _run(seed=1, n=2)
    with pytest.raises(ValueError, match="among"):
        opt.best(among="everywhere")
    with pytest.raises(ValueError, match="No answers"):
        PreferenceOptimizer(BOUNDS, seed=0).best(among="anywhere")
