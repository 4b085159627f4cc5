"""Local queries: the acquisition maximised in a box around the incumbent."""

from __future__ import annotations

import math

import pytest
import torch
from botorch.acquisition import PosteriorMean

from botorch_pref import PairwiseLaplaceGP
from botorch_pref.acquisition import LocalBox, local_box
from botorch_pref.loop import LoopConfig, PreferenceOptimizer

DT = torch.float64


def _model() -> PairwiseLaplaceGP:
    g = torch.Generator().manual_seed(0)
    X = torch.rand(8, 2, generator=g, dtype=DT)
    f = -((X - 0.7) ** 2).sum(-1)
    C = torch.tensor([[i, i + 1] if f[i] > f[i + 1] else [i + 1, i] for i in range(7)])
    return PairwiseLaplaceGP(X, C).eval()


def test_local_box_clips_to_the_unit_cube():
    lower, upper = local_box(torch.tensor([[0.95, 0.5], [0.02, 0.1]], dtype=DT), 0.1)
    assert torch.allclose(lower, torch.tensor([[0.85, 0.4], [0.0, 0.0]], dtype=DT))
    assert torch.allclose(upper, torch.tensor([[1.0, 0.6], [0.12, 0.2]], dtype=DT))
    with pytest.raises(ValueError, match="radius"):
        local_box(torch.zeros(1, 2), 0.0)


def test_local_box_evaluates_the_acquisition_at_the_mapped_points():
    model = _model()
    inner = PosteriorMean(model)
    lower = torch.tensor([[0.2, 0.5]], dtype=DT)
    upper = torch.tensor([[0.4, 1.0]], dtype=DT)
    acqf = LocalBox(inner, lower, upper)
    U = torch.rand(5, 1, 2, generator=torch.Generator().manual_seed(1), dtype=DT)
    mapped = torch.stack([0.2 + 0.2 * U[..., 0], 0.5 + 0.5 * U[..., 1]], dim=-1)
    assert torch.allclose(acqf(U), inner(mapped))
    assert torch.allclose(acqf.to_box(U), mapped)
    # corners of the unit cube land on the corners of the box
    assert torch.allclose(acqf.to_box(torch.ones(1, 1, 2, dtype=DT)), upper)


@pytest.mark.parametrize(
    "lower, upper, message",
    [
        (torch.zeros(2), torch.ones(2), "m x d"),
        (torch.zeros(1, 2), torch.ones(1, 3), "m x d"),
        (torch.ones(1, 2), torch.zeros(1, 2), ">= lower"),
    ],
)
def test_local_box_rejects_bad_bounds(lower, upper, message):
    with pytest.raises(ValueError, match=message):
        LocalBox(PosteriorMean(_model()), lower.to(DT), upper.to(DT))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"local_every": -1}, "local_every"),
        ({"local_every": 2, "strategy": "random"}, "local_every"),
        ({"local_every": 2, "strategy": "qeubo", "q": 3}, "q = 2"),
        ({"local_every": 1.5}, "local_every"),
        ({"local_radius": 0.0}, "local_radius"),
        ({"local_radius": 0.6}, "local_radius"),
        ({"local_radius": math.nan}, "local_radius"),
        ({"local_radius": True}, "local_radius"),
        ({"local_radius": "0.1"}, "local_radius"),
    ],
)
def test_bad_local_settings_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LoopConfig(2, **kwargs)


def test_the_schedule_counts_acquisition_queries():
    cfg = LoopConfig(2, n_initial=4, local_every=3)
    assert [k for k in range(12) if cfg.local_due(k)] == [6, 9]
    assert not any(LoopConfig(2, n_initial=4, local_every=0).local_due(k) for k in range(12))


def test_local_queries_by_default_for_pairs_only():
    from botorch_pref.loop.config import DEFAULT_LOCAL_EVERY

    assert LoopConfig(2).local_every == DEFAULT_LOCAL_EVERY
    assert LoopConfig(2, strategy="champion-challenger").local_every == DEFAULT_LOCAL_EVERY
    assert LoopConfig(2, strategy="qeubo", q=2).local_every == DEFAULT_LOCAL_EVERY
    assert LoopConfig(2, strategy="qeubo", q=3).local_every == 0
    assert LoopConfig(2, strategy="random").local_every == 0


@pytest.mark.parametrize("strategy", ["eubo", "champion-challenger"])
def test_local_queries_stay_near_the_best_compared_design(strategy):
    bounds = torch.tensor([[-5.0, 0.0], [10.0, 15.0]], dtype=DT)
    opt = PreferenceOptimizer(
        bounds, strategy, n_initial=4, local_every=1, local_radius=0.05, seed=3
    )
    width = bounds[1] - bounds[0]
    for _ in range(8):
        X = opt.ask()
        if opt.n_queries >= 4:
            # the incumbent before this query: its box (radius 0.05 of each side) holds X
            center = opt.best().x
            assert torch.equal(X[0], center)  # the champion, then a challenger in its box
            assert bool(((X - center).abs() <= 0.05 * width + 1e-9).all()), (X, center)
        utility = -((X - torch.tensor([9.4, 2.5], dtype=DT)) ** 2).sum(-1)
        opt.tell(X, winner=int(utility.argmax()))
