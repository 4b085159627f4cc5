"""Local queries: the acquisition maximised in a box around the incumbent."""

from __future__ import annotations

import math

import pytest
import torch
from botorch.acquisition import PosteriorMean

from botorch_pref import PairwiseLaplaceGP
from botorch_pref.acquisition import LocalBox, local_box, near_boundary
from botorch_pref.loop import Local, LoopState, PreferenceOptimizer, QueryPolicy
from botorch_pref.loop.answers import Answer
from botorch_pref.loop.policy import configure

DT = torch.float64


def _policy(dim: int = 2, strategy: str | None = None, q: int = 2, **settings) -> QueryPolicy:
    """The policy ``strategy=`` and ``settings`` build (raising as the optimiser raises)."""
    return configure(dim, strategy, q, None, settings)[1]


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


def test_near_boundary_flags_exactly_the_centres_whose_box_is_clipped():
    center = torch.rand(300, 3, generator=torch.Generator().manual_seed(0), dtype=DT)
    center[:4] = torch.tensor([[0.5] * 3, [0.05, 0.5, 0.95], [0.0, 0.5, 0.5], [0.5, 0.5, 1.0]])
    for radius in (0.05, 0.2):
        lower, upper = local_box(center, radius)
        clipped = ((lower != center - radius) | (upper != center + radius)).any(-1)
        assert torch.equal(near_boundary(center, radius), clipped)
    assert near_boundary(center[:4], 0.05).tolist() == [False, False, True, True]
    with pytest.raises(ValueError, match="margin"):
        near_boundary(center, -0.1)


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
        ({"local_when": "sometimes"}, "local_when"),
        ({"local_when": None}, "local_when"),
        ({"local_radius": 0.0}, "local_radius"),
        ({"local_radius": 0.6}, "local_radius"),
        ({"local_radius": math.nan}, "local_radius"),
        ({"local_radius": True}, "local_radius"),
        ({"local_radius": "0.1"}, "local_radius"),
    ],
)
def test_bad_local_settings_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _policy(**kwargs)


def _local_queries(policy: QueryPolicy, n: int) -> list[int]:
    return [k for k in range(n) if any(isinstance(s, Local) for s in policy.due(k))]


def test_the_schedule_counts_acquisition_queries():
    assert _local_queries(_policy(n_initial=4, local_every=3), 12) == [6, 9]
    assert _local_queries(_policy(n_initial=4, local_every=0), 12) == []


def test_local_queries_by_default_for_pairs_only():
    from botorch_pref.loop.policy import DEFAULT_LOCAL_EVERY

    def every(**kwargs):
        return _policy(**kwargs).settings["local_every"]

    assert every() == DEFAULT_LOCAL_EVERY
    assert every(strategy="champion-challenger") == DEFAULT_LOCAL_EVERY
    assert every(strategy="qeubo", q=2) == DEFAULT_LOCAL_EVERY
    assert every(strategy="qeubo", q=3) == 0
    assert every(strategy="random") == 0


@pytest.mark.parametrize("strategy", ["eubo", "champion-challenger"])
def test_local_queries_stay_near_the_best_compared_design(strategy):
    bounds = torch.tensor([[-5.0, 0.0], [10.0, 15.0]], dtype=DT)
    opt = PreferenceOptimizer(
        bounds, strategy, n_initial=4, local_every=1, local_radius=0.05, local_when="always", seed=3
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


BRANIN_BOX = torch.tensor([[-5.0, 0.0], [10.0, 15.0]], dtype=DT)


@pytest.mark.parametrize("peak", [(9.9, 2.5), (2.5, 7.5)])
def test_a_due_local_query_is_asked_only_around_a_champion_near_the_edge(peak):
    """``local_when="edge"`` (the default): local where the champion's box is clipped, else
    the global EUBO pair."""
    opt = PreferenceOptimizer(BRANIN_BOX, "eubo", n_initial=4, local_every=1, seed=5)
    kinds = []
    for _ in range(12):
        X = opt.ask()
        if opt.n_queries >= 4:
            champion = opt.best().x
            edge = bool(near_boundary(opt.to_unit(champion).unsqueeze(0), 0.05))
            assert isinstance(opt.acquisition_function()[0], LocalBox) == edge
            assert torch.equal(X[0], champion) == edge
            kinds.append(edge)
        utility = -((X - torch.tensor(peak, dtype=DT)) ** 2).sum(-1)
        opt.tell(X, winner=int(utility.argmax()))
    # the edge peak ends with local queries, the interior one with global queries
    assert kinds[-1] == (peak[0] > 9.5)


def test_members_of_a_batched_group_each_get_their_own_kind_of_query():
    state = LoopState.build(
        BRANIN_BOX,
        "eubo",
        n_initial=3,
        local_every=1,
        seed=0,
        seeds=[0, 1, 2, 3],
        backend="batched",
    )
    peaks = torch.tensor([[10.0, 2.5], [2.5, 7.5], [-5.0, 15.0], [4.0, 5.0]], dtype=DT)
    mixed = 0
    for k in range(10):
        if k >= 3:
            members = list(range(4))
            champions = state.designs_at(members, state.champions(members), unit=False)
            edge = near_boundary(state.designs_at(members, state.champions(members)), 0.05)
            mixed += bool(edge.any()) and not bool(edge.all())
        X = state.propose()
        for r in range(4 if k >= 3 else 0):
            assert torch.equal(X[r, 0], champions[r]) == bool(edge[r]), (k, r)
            if edge[r]:  # the challenger lies in the champion's box
                half = 0.05 * (BRANIN_BOX[1] - BRANIN_BOX[0]) + 1e-9
                assert bool(((X[r, 1] - champions[r]).abs() <= half).all())
        winners = [int((-((x - p) ** 2).sum(-1)).argmax()) for x, p in zip(X, peaks, strict=True)]
        state.record_answers(list(X), [Answer("winner", w) for w in winners])
    assert mixed > 0  # the members disagreed on some query
