"""Recommendations of the loop: the best compared design, or the posterior-mean maximiser."""

from __future__ import annotations

import pytest
import torch

from botorch_pref import PreferenceOptimizer
from botorch_pref.loop import LoopState
from botorch_pref.loop.answers import Answer

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


@pytest.mark.parametrize(("backend", "seeds"), [("batched", [0, 1, 2, 3]), ("sequential", [0])])
def test_best_anywhere_climbs_from_the_best_compared_designs(backend, seeds):
    # A rippled posterior mean in six dimensions and one random start: that start ends on a
    # lower peak than the best compared design's for members 0 and 2. The optimiser also starts
    # from the best compared designs, so it ends above all of them, at a stationary point.
    d = 6
    box = torch.stack([torch.zeros(d, dtype=DT), torch.ones(d, dtype=DT)])
    state = LoopState.build(
        box, "random", n_initial=30, num_restarts=1, raw_samples=1, seeds=seeds, backend=backend
    )
    for _ in range(30):
        X = state.propose()
        winners = [int(torch.cos(9 * x).sum(-1).argmax()) for x in X]
        state.record_answers(list(X), [Answer("winner", w) for w in winners])
    group = state.groups[0]
    x = state.mean_maximisers(group).requires_grad_(True)  # members x d
    mean = group.model.posterior(x.unsqueeze(-2) if backend == "batched" else x).mean
    (grad,) = torch.autograd.grad(mean.sum(), x)
    best = [float(m.max()) for m in state.means(group.members)]
    for r in range(len(seeds)):
        assert float(mean.reshape(-1)[r]) > best[r] + 1e-3
        inside = (x[r] > 1e-6) & (x[r] < 1 - 1e-6)  # no pull along the free coordinates
        assert float(grad[r][inside].abs().max()) < 1e-3
