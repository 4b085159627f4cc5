"""One loop: lockstep replications run the optimiser's own core (botorch_pref.loop.state)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from botorch_pref.loop import LoopConfig, LoopState, run_replications, strategy_policy
from botorch_pref.loop.answers import Answer
from botorch_pref.test_functions import get_utility

from .helpers import optimizer_run

DT = torch.float64
SCALE = 0.1


@pytest.mark.parametrize(("strategy", "q"), [("eubo", 2), ("champion-challenger", 2), ("qeubo", 3)])
def test_one_sequential_replication_is_theoptimizer_run(strategy, q):
    settings = {"strategy": strategy, "q": q, "n_initial": 3, "refit_all_until": 4}
    res = run_replications(
        "branin", n_replications=1, n_queries=3, scale=SCALE, seed=7, backend="sequential",
        **settings,
    )  # fmt: skip
    opt, queries, winners, best = optimizer_run("branin", 7, 6, **settings)
    torch.testing.assert_close(res.queries[0], queries, rtol=0, atol=1e-9)
    assert torch.equal(res.winners[0], winners)
    torch.testing.assert_close(res.best_x[0], best, rtol=0, atol=1e-9)
    assert res.fits == opt.n_refits
    assert res.config == opt.config


def test_sequential_replications_are_independent_optimizer_runs():
    settings = {"strategy": "eubo", "n_initial": 3, "refit_all_until": 3, "refit_every": 2}
    res = run_replications(
        "branin", n_replications=2, n_queries=2, scale=SCALE, seed=4, backend="sequential",
        **settings,
    )  # fmt: skip
    for r in range(2):
        _, queries, winners, best = optimizer_run("branin", 4 + r, 5, **settings)
        torch.testing.assert_close(res.queries[r], queries, rtol=0, atol=1e-9)
        assert torch.equal(res.winners[r], winners)
        torch.testing.assert_close(res.best_x[r], best, rtol=0, atol=1e-9)


@pytest.mark.parametrize(("strategy", "q"), [("eubo", 2), ("qeubo", 3)])
def test_batched_members_start_as_their_sequential_runs_with_the_same_settings(strategy, q):
    res = run_replications(
        "branin", strategy, n_replications=3, n_queries=2, q=q, n_initial=4, scale=SCALE, seed=20
    )
    assert res.backend == "batched" and res.queries.shape == (3, 6, q, 2)
    for r in range(3):
        opt, queries, winners, _ = optimizer_run(
            "branin", 20 + r, 4, strategy=strategy, q=q, n_initial=4
        )
        torch.testing.assert_close(res.queries[r, :4], queries, rtol=0, atol=0)
        assert torch.equal(res.winners[r, :4], winners)
        # the same settings as the optimiser's, defaults included (the seed aside)
        assert res.config == dataclasses.replace(opt.config, seed=20)
    assert bool(torch.isfinite(res.regret).all())


def test_replications_use_the_optimizer_defaults():
    res = run_replications("hartmann6", "qeubo", n_replications=1, n_queries=0, q=3, scale=0.2)
    defaults = LoopConfig(6, 3, seed=0).with_effort(3)
    assert res.config == defaults and res.policy == strategy_policy("qeubo", defaults)
    assert res.n_initial == 20 and res.policy.steps[-1].mc_samples == 128
    assert res.answers == "choice"


def test_loop_state_rejects_a_bad_backend_or_no_member():
    config = LoopConfig(2, seed=0)
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=DT)
    with pytest.raises(ValueError, match="backend"):
        LoopState(config, bounds, backend="threads")
    with pytest.raises(ValueError, match="seeds must name at least one member"):
        LoopState(config, bounds, seeds=[], backend="batched")
    with pytest.raises(ValueError, match="batched back end"):
        LoopState(
            dataclasses.replace(config, model="pairwisegp"),
            bounds,
            [0, 1],
            "batched",
        )


def test_anywhere_recommendation_of_a_sequential_replication_is_the_optimizers():
    settings = {"strategy": "eubo", "n_initial": 3, "refit_all_until": 4}
    res = run_replications(
        "branin", n_replications=1, n_queries=2, scale=SCALE, seed=5, backend="sequential",
        anywhere_after=(2, 0), **settings,
    )  # fmt: skip
    assert res.anywhere_after == (2, 0) and res.regret_anywhere.shape == (1, 2)
    branin = get_utility("branin")
    for col, steps in ((0, 5), (1, 3)):
        opt, *_ = optimizer_run("branin", 5, steps, **settings)
        x = opt.best(among="anywhere").x
        assert float(res.regret_anywhere[0, col]) == pytest.approx(float(branin.regret(x)))
    torch.testing.assert_close(res.log_regret_anywhere(), res.regret_anywhere.log10())


def test_regret_compared_is_the_best_asked_design_so_far_and_bounds_the_recommendations():
    res = run_replications(
        "branin", n_replications=2, n_queries=3, n_initial=3, scale=SCALE, seed=2
    )
    branin = get_utility("branin")
    assert res.regret_compared.shape == res.regret.shape == (2, 6)
    for r in range(2):
        for t in range(6):
            asked = res.queries[r, : t + 1].reshape(-1, 2)  # every design of answers 1..t+1
            brute = min(float(branin.regret(x.unsqueeze(0))) for x in asked)
            assert float(res.regret_compared[r, t]) == pytest.approx(brute, abs=1e-12)
    # the recommendation is one of the compared designs, so it is never better than the best
    assert bool((res.regret >= res.regret_compared - 1e-12).all())
    torch.testing.assert_close(res.log_regret_compared(), res.regret_compared.log10())


def test_batched_anywhere_recommendations_beat_every_compared_design_in_posterior_mean():
    bounds = torch.tensor([[-5.0, 0.0], [10.0, 15.0]], dtype=DT)
    state = LoopState.build(bounds, "eubo", n_initial=3, seed=0, seeds=[0, 1, 2], backend="batched")
    for k in range(4):
        X = state.propose()
        winners = [int(x[:, 0].argmax()) if r else k % 2 for r, x in enumerate(X)]
        state.record_answers(list(X), [Answer("winner", w) for w in winners])
    X = state.recommend_anywhere()
    assert X.shape == (3, 2)
    assert bool(((X >= bounds[0]) & (X <= bounds[1])).all())
    unit = (X - bounds[0]) / (bounds[1] - bounds[0])
    with torch.no_grad():
        at_x = state.group_of(0).model.posterior(unit.unsqueeze(-2)).mean.reshape(3)
    best_compared = torch.stack([m.max() for m in state.means()])
    assert bool((at_x >= best_compared - 1e-9).all())
    # member 2 (always prefers larger x1) is recommended a design at the upper x1 edge
    assert float(unit[2, 0]) > 0.9


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_replications": 2.5}, "n_replications must be an integer, got 2.5"),
        ({"n_replications": 0}, "n_replications must be a positive integer, got 0"),
        ({"n_queries": 1.5}, "n_queries must be an integer, got 1.5"),
        ({"n_queries": -1}, "n_queries must be a non-negative integer, got -1"),
        ({"seed": 0.5}, "seed must be an integer, got 0.5"),
        ({"seed": None}, "seed must be an integer, got None"),
        ({"anywhere_after": [0.5]}, "anywhere_after must be an integer, got 0.5"),
    ],
)
def test_counts_and_seed_are_refused_unless_integers(kwargs, message):
    """No silent truncation: 2.5 replications is an error, not 2."""
    settings = {"n_replications": 1, "n_queries": 2, "scale": SCALE, **kwargs}
    with pytest.raises(ValueError, match=message):
        run_replications("branin", **settings)


def test_anywhere_after_is_validated():
    with pytest.raises(ValueError, match="anywhere_after"):
        run_replications("branin", n_replications=1, n_queries=2, scale=SCALE, anywhere_after=[3])
    with pytest.raises(ValueError, match="anywhere_after"):
        run_replications(
            "branin", n_replications=1, n_queries=2, scale=SCALE, anywhere_after=[1, 1]
        )
    with pytest.raises(ValueError, match="with n_initial=0 the count 0 comes before any answer"):
        run_replications(
            "branin", n_replications=1, n_queries=2, n_initial=0, scale=SCALE, anywhere_after=[0]
        )
    res = run_replications("branin", n_replications=1, n_queries=0, n_initial=2, scale=SCALE)
    with pytest.raises(ValueError, match="anywhere_after"):
        res.log_regret_anywhere()


@pytest.mark.parametrize("ties", [False, True])
def test_ep_replications_are_optimizer_runs_and_replay(ties):
    # The batched back end's members are checked against separate models in tests/test_ep.py
    # (its acquisition optimiser may settle in another of two near-equal modes, as Laplace's).
    from botorch_pref import PreferenceOptimizer

    settings = {"strategy": "eubo", "n_initial": 3, "refit_all_until": 5, "inference": "ep"}
    settings["ties"] = ties
    kw = {"n_queries": 2, "scale": SCALE, "seed": 9, **settings}
    res = run_replications("branin", n_replications=1, backend="sequential", **kw)
    opt, queries, winners, best = optimizer_run("branin", 9, 5, **settings)
    assert res.config.model.inference == opt.model.inference == "ep"
    torch.testing.assert_close(res.queries[0], queries, rtol=0, atol=1e-9)
    assert torch.equal(res.winners[0], winners)
    torch.testing.assert_close(res.best_x[0], best, rtol=0, atol=1e-9)
    replayed = PreferenceOptimizer.replay(opt.history, opt.bounds, seed=9, **settings)
    torch.testing.assert_close(replayed.ask(), opt.ask(), rtol=0, atol=0)
    batched = run_replications("branin", n_replications=2, **kw)
    assert batched.backend == "batched" and bool(torch.isfinite(batched.regret).all())


def test_users_with_a_tie_band_answer_no_preference_and_the_loop_models_it():
    from botorch_pref.users import SimulatedUser

    kw = {"n_queries": 4, "scale": SCALE, "seed": 5, "strategy": "eubo", "n_initial": 4}
    res = run_replications("branin", n_replications=2, tie_band=150.0, ties=True, **kw)
    ties = res.winners == -1
    assert 0 < int(ties.sum()) < ties.numel()
    # the users' answers, recomputed from the asked queries with the same seeds
    for r, s in enumerate(res.seeds):
        user = SimulatedUser(get_utility("branin"), "gumbel", SCALE, seed=s)
        expected = [int(user.answer_pair(x, 150.0 * SCALE)) for x in res.queries[r]]
        assert res.winners[r].tolist() == expected
    assert bool(torch.isfinite(res.regret).all())
    # without a band the same seeds give the same answers outside the ties
    plain = run_replications("branin", n_replications=2, ties=True, **kw)
    first = res.n_initial  # the initial queries are the same; later ones follow the answers
    assert torch.equal(
        plain.winners[:, :first][~ties[:, :first]], res.winners[:, :first][~ties[:, :first]]
    )
    with pytest.raises(ValueError, match="ties=True"):
        run_replications("branin", n_replications=1, tie_band=0.5, **kw)
    with pytest.raises(ValueError, match="tie_band"):
        run_replications("branin", n_replications=1, tie_band=-1.0, ties=True, **kw)


def test_log10_regret_floors_zero_and_keeps_a_tensors_dtype():
    from botorch_pref.loop.replications import REGRET_FLOOR, log10_regret

    values = [-1e-16, 0.0, 1e-15, 3e-4, 1.0, 250.0]
    expected = [math.log10(max(v, REGRET_FLOOR)) for v in values]
    assert log10_regret(values).dtype == torch.float64
    assert log10_regret(values).tolist() == pytest.approx(expected, rel=1e-12)
    assert float(log10_regret(0.0)) == -12.0
    assert math.isnan(float(log10_regret(math.nan)))
    as32 = log10_regret(torch.tensor([[0.0, 0.5]], dtype=torch.float32))
    assert as32.dtype == torch.float32 and as32.shape == (1, 2)
    assert as32.tolist()[0] == pytest.approx([-12.0, math.log10(0.5)], rel=1e-6)
