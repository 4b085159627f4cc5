"""The query policy: an ordered list of steps, the default one, and a policy of one's own."""

from __future__ import annotations

import pytest
import torch

from botorch_pref.acquisition import LookaheadBestCompared, make_eubo
from botorch_pref.acquisition.local import LocalBox
from botorch_pref.loop import (
    Acquire,
    Initial,
    Local,
    Lookahead,
    LoopConfig,
    PreferenceOptimizer,
    QueryPolicy,
    default_policy,
    run_replications,
    strategy_policy,
)

DT = torch.float64
BRANIN_BOX = torch.tensor([[-5.0, 0.0], [10.0, 15.0]], dtype=DT)
PEAK = torch.tensor([2.5, 7.5], dtype=DT)


def _answer(X: torch.Tensor) -> int:
    return int((-((X - PEAK) ** 2).sum(-1)).argmax())


@pytest.mark.parametrize("dim", [2, 6, 9])
def test_the_default_policy_is_what_strategy_eubo_builds(dim):
    assert strategy_policy("eubo", LoopConfig(dim)) == default_policy(dim)
    assert default_policy(dim).n_initial == min(4 * dim, 20)
    opt = PreferenceOptimizer(torch.stack([torch.zeros(dim), torch.ones(dim)]), seed=0)
    assert opt.policy == default_policy(dim)


def test_strategies_build_their_steps():
    config = LoopConfig(2)
    kinds = {
        s: [type(step) for step in strategy_policy(s, config).steps]
        for s in ("eubo", "qeubo", "champion-challenger", "random")
    }
    assert kinds["eubo"] == [Initial, Local, Lookahead, Acquire]
    assert kinds["qeubo"] == [Initial, Local, Lookahead, Acquire]
    assert kinds["champion-challenger"] == [Initial, Local, Acquire]
    assert kinds["random"] == [Initial, Acquire]
    q3 = strategy_policy("qeubo", LoopConfig(2, q=3))
    assert [type(step) for step in q3.steps] == [Initial, Acquire]


def test_the_first_due_step_that_applies_is_asked():
    policy = QueryPolicy(
        [Initial(2), Local(every=2, when="always"), Lookahead(every=3), Acquire("eubo")]
    )
    names = [type(policy.due(k)[0]).__name__ for k in range(10)]
    # acquisition query 2, 4, 6 local; 3 lookahead; 6 is both, and the local step comes first
    assert names == ["Initial"] * 2 + ["Acquire", "Local", "Lookahead", "Local", "Acquire"] + [
        "Local",
        "Acquire",
        "Local",
    ]
    assert all(isinstance(policy.due(k)[-1], Acquire) for k in range(2, 10))


def test_a_policy_of_ones_own_asks_eubo_on_every_acquisition_query():
    """BoTorch's pipeline: random initial queries, then EUBO every time; the queries are those
    of ``strategy="eubo"`` without local and lookahead queries, bit for bit."""
    policy = QueryPolicy([Initial(3), Acquire("eubo")])
    opt = PreferenceOptimizer(BRANIN_BOX, policy=policy, seed=1, num_restarts=2, raw_samples=32)
    same = PreferenceOptimizer(
        BRANIN_BOX, "eubo", n_initial=3, local_every=0, lookahead_every=0, seed=1,
        num_restarts=2, raw_samples=32,
    )  # fmt: skip
    for k in range(8):
        if k >= 3:
            acqf = opt.acquisition_function()[0]
            assert not isinstance(acqf, (LocalBox, LookaheadBestCompared))
            assert type(acqf) is type(make_eubo(opt.model))
        X = opt.ask()
        assert torch.equal(X, same.ask())
        opt.tell(X, _answer(X))
        same.tell(X, _answer(X))
    assert opt.settings["strategy"] == "eubo" and "local_every" not in opt.settings


def test_local_and_lookahead_steps_of_ones_own():
    policy = QueryPolicy([Initial(3), Local(every=1, when="always"), Acquire("eubo")])
    opt = PreferenceOptimizer(BRANIN_BOX, policy=policy, seed=2, num_restarts=2, raw_samples=32)
    for k in range(5):
        if k >= 3:
            assert isinstance(opt.acquisition_function()[0], LocalBox)
        X = opt.ask()
        if k >= 3:  # the champion against a challenger
            assert torch.equal(X[0], opt.best().x)
        opt.tell(X, _answer(X))
    policy = QueryPolicy([Initial(3), Lookahead(every=1), Acquire("qeubo")])
    opt = PreferenceOptimizer(BRANIN_BOX, policy=policy, seed=2, num_restarts=2, raw_samples=32)
    for _ in range(3):
        X = opt.ask()
        opt.tell(X, _answer(X))
    assert isinstance(opt.acquisition_function()[0], LookaheadBestCompared)


def test_replications_take_a_policy():
    policy = QueryPolicy([Initial(3), Acquire("eubo")])
    common = {"n_replications": 1, "n_queries": 2, "scale": 0.1, "seed": 3, "backend": "sequential"}
    res = run_replications("branin", policy=policy, num_restarts=2, raw_samples=32, **common)
    same = run_replications(
        "branin", "eubo", n_initial=3, local_every=0, lookahead_every=0, num_restarts=2,
        raw_samples=32, **common,
    )  # fmt: skip
    assert res.policy == policy and res.n_initial == 3
    assert torch.equal(res.queries, same.queries)


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([], "non-empty list of steps"),
        ([Initial(2)], "last step must be an Acquire"),
        ([Acquire("eubo"), Initial(2), Acquire("eubo")], "Initial step must come first"),
        (["eubo"], "non-empty list of steps"),
    ],
)
def test_bad_policies_raise(steps, message):
    with pytest.raises(ValueError, match=message):
        QueryPolicy(steps)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"policy": QueryPolicy([Acquire("eubo")]), "strategy": "eubo"}, "either policy="),
        ({"policy": QueryPolicy([Acquire("eubo")]), "local_every": 2}, "either policy="),
        ({"policy": QueryPolicy([Acquire("eubo")]), "q": 3}, "asks about pairs"),
        ({"policy": QueryPolicy([Local(), Acquire("qeubo")]), "q": 3}, "local queries"),
        ({"policy": QueryPolicy([Lookahead(), Acquire("qeubo")]), "answers": "choice"}, "pairs"),
        ({"policy": [Initial(2), Acquire("eubo")]}, "must be a QueryPolicy"),
    ],
)
def test_a_policy_that_cannot_ask_the_run_raises(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PreferenceOptimizer(BRANIN_BOX, **kwargs)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Initial(-1), "n_initial"),
        (lambda: Local(every=0), "local_every"),
        (lambda: Local(when="sometimes"), "local_when"),
        (lambda: Local(radius=0.7), "local_radius"),
        (lambda: Lookahead(every=1.5), "lookahead_every"),
        (lambda: Acquire("ucb"), "strategy"),
        (lambda: Acquire("qeubo", mc_samples=0), "mc_samples"),
        (lambda: Acquire("champion-challenger", variant="x"), "champion_variant"),
    ],
)
def test_bad_steps_raise(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_random_step_has_no_acquisition_function():
    opt = PreferenceOptimizer(BRANIN_BOX, "random", seed=0, n_initial=1)
    X = opt.ask()
    opt.tell(X, 0)
    with pytest.raises(ValueError, match="no acquisition function"):
        opt.acquisition_function()
