"""Batched optimisers and lockstep PBO replications."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.optim import optimize_acqf

from botorch_pref import LaplaceEvidence, PairwiseLaplaceGP
from botorch_pref.acquisition import make_eubo
from botorch_pref.loop import run_replications
from botorch_pref.models.pairwise import make_covar_module
from botorch_pref.optim import fit_evidence_batched, minimize_batched, optimize_acqf_batched
from botorch_pref.test_functions import get_utility

from .helpers import assert_hyperparameters_close, optimizer_run

DT = torch.float64


def _data(n: int, m: int, seed: int, d: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=DT)
    util = torch.sin(5 * X[:, 0]) + X[:, 1]
    idx = torch.stack([torch.randperm(n, generator=g)[:2] for _ in range(m)])
    noisy = util[idx] + 0.3 * torch.randn(m, 2, generator=g, dtype=DT)
    C = torch.where((noisy[:, 0] < noisy[:, 1]).unsqueeze(-1), idx.flip(-1), idx)
    return X, C


def _stack(datasets):
    n = max(X.shape[0] for X, _ in datasets)
    m = max(C.shape[0] for _, C in datasets)
    X = torch.stack([torch.cat([X, X[:1].expand(n - len(X), -1)]) for X, _ in datasets])
    C = torch.stack([torch.cat([C, torch.full((m - len(C), 2), -1)]) for _, C in datasets])
    return X, C


def test_minimize_batched_solves_independent_problems():
    # problem i: sum_j (x_j - c_ij)^2 * s_i, minimum at c_i clipped to the bounds
    g = torch.Generator().manual_seed(0)
    c = torch.rand(6, 3, generator=g, dtype=DT) * 3 - 1
    s = torch.tensor([1.0, 10.0, 100.0, 0.1, 1.0, 5.0], dtype=DT)

    def objective(x):
        return ((x - c) ** 2).sum(-1) * s

    x, values = minimize_batched(objective, torch.full((6, 3), 0.5, dtype=DT), (0.0, 1.0))
    torch.testing.assert_close(x, c.clamp(0, 1), atol=1e-5, rtol=0)
    torch.testing.assert_close(values, objective(c.clamp(0, 1)), atol=1e-8, rtol=0)


def test_minimize_batched_charges_an_isolated_error_to_the_failing_problem_only():
    # problem i: sum_j (x_j - c_ij)^2; problem 1's linear algebra "fails" beyond x_0 = 0.3
    c = torch.tensor([[0.2, 0.7], [0.8, 0.4], [0.5, 0.9]], dtype=DT)

    def clean(x):
        return ((x - c) ** 2).sum(-1)

    def failing(x):
        if bool((x[1, 0] > 0.3).any()):
            raise torch.linalg.LinAlgError("linalg.cholesky: (Batch element 1): not PD")
        return clean(x)

    x0 = torch.full((3, 2), 0.1, dtype=DT)
    with pytest.raises(torch.linalg.LinAlgError):  # not isolated: the run ends
        minimize_batched(failing, x0, (0.0, 1.0))
    ref, ref_values = minimize_batched(clean, x0, (0.0, 1.0))
    with pytest.warns(RuntimeWarning, match=r"problem\(s\) \[1\]"):
        x, values = minimize_batched(failing, x0, (0.0, 1.0), isolate=(torch.linalg.LinAlgError,))
    # the other problems run exactly as without the failure
    torch.testing.assert_close(x[[0, 2]], ref[[0, 2]], rtol=0, atol=0)
    torch.testing.assert_close(values[[0, 2]], ref_values[[0, 2]], rtol=0, atol=0)
    # the failing one ends at a point that evaluates, no worse than its start
    assert float(x[1, 0]) <= 0.3 and bool(torch.isfinite(values[1]))
    assert float(values[1]) <= float(clean(x0)[1])
    with pytest.raises(torch.linalg.LinAlgError):  # failing at the start: nothing to fall back on
        minimize_batched(
            failing, torch.full((3, 2), 0.5, dtype=DT), isolate=(torch.linalg.LinAlgError,)
        )


def test_minimize_batched_never_returns_non_finite_variables(monkeypatch):
    # L-BFGS-B's line search can break down into NaN variables after trial points charged
    # +inf (seen on a batched Matern 5/2 fit); stand in for such a run: evaluate two points
    # per problem, then end with problem 1's variables NaN.
    import botorch_pref.optim as optim

    c = torch.tensor([[0.2, 0.7], [0.8, 0.4], [0.5, 0.9]], dtype=DT)

    def objective(x):
        return ((x - c) ** 2).sum(-1)

    def broken_lbfgs(func, x0, **kwargs):
        first = np.full_like(x0, 0.6)
        func(first, batch_indices=[0, 1, 2])
        func(x0, batch_indices=[0, 1, 2])
        xs = first.copy()
        xs[1] = np.nan
        return xs, None, None

    monkeypatch.setattr(optim, "fmin_l_bfgs_b_batched", broken_lbfgs)
    x0 = torch.full((3, 2), 0.1, dtype=DT)
    with pytest.warns(RuntimeWarning, match=r"non-finite variables for problem\(s\) \[1\]"):
        x, values = minimize_batched(objective, x0, (0.0, 1.0))
    assert bool(torch.isfinite(x).all())
    # problem 1 gets the better of its two evaluated points, 0.6 (0.1 is farther from c[1])
    torch.testing.assert_close(x[1], torch.full((2,), 0.6, dtype=DT), rtol=0, atol=0)
    torch.testing.assert_close(x[[0, 2]], torch.full((2, 2), 0.6, dtype=DT), rtol=0, atol=0)
    torch.testing.assert_close(values, objective(x), rtol=0, atol=0)


def test_fit_evidence_batched_matches_separate_fits():
    datasets = [_data(12, 20, 1), _data(50, 100, 2), _data(5, 3, 3)]
    X, C = _stack(datasets)
    batch = PairwiseLaplaceGP(X, C, covar_module=make_covar_module(2, batch_shape=torch.Size([3])))
    fit_evidence_batched(batch)
    for i, (Xi, Ci) in enumerate(datasets):
        single = PairwiseLaplaceGP(Xi, Ci, covar_module=make_covar_module(2))
        fit_gpytorch_mll(LaplaceEvidence(single.likelihood, single))
        assert_hyperparameters_close(batch, i, single, atol=0.02)


def test_fit_evidence_batched_needs_batched_hyperparameters():
    X, C = _stack([_data(6, 5, 0), _data(6, 5, 1)])
    # one kernel for both members (the default kernel has the data's batch shape)
    shared = PairwiseLaplaceGP(X, C, covar_module=make_covar_module(2))
    with pytest.raises(ValueError, match="batch_shape"):
        fit_evidence_batched(shared)


def test_optimize_acqf_batched_as_good_as_optimize_acqf():
    datasets = [_data(15, 25, 4), _data(30, 40, 5)]
    X, C = _stack(datasets)
    kernel = make_covar_module(2, batch_shape=torch.Size([2]))
    batch = PairwiseLaplaceGP(X, C, covar_module=kernel)
    cand, values = optimize_acqf_batched(
        make_eubo(batch), 2, 2, 2, num_restarts=6, raw_samples=128, seeds=[0, 1]
    )
    assert cand.shape == (2, 2, 2) and bool(((cand >= 0) & (cand <= 1)).all())
    for i, (Xi, Ci) in enumerate(datasets):
        single = PairwiseLaplaceGP(Xi, Ci, covar_module=make_covar_module(2))
        acqf = make_eubo(single)
        torch.manual_seed(0)
        _, ref = optimize_acqf(
            acqf, torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=DT), 2, 6, raw_samples=128
        )
        # the batched optimum is the member's own EUBO value, and at least as good
        torch.testing.assert_close(acqf(cand[i].unsqueeze(0)).squeeze(), values[i])
        assert float(values[i]) >= float(ref) - 1e-4


def _sequential(problem, strategy, seed, n_initial, n_queries, scale):
    utility = get_utility(problem)
    _, queries, winners, best = optimizer_run(
        problem, seed, n_initial + n_queries, scale, strategy=strategy, n_initial=n_initial
    )
    return queries, winners, utility.regret(best)


def test_random_replications_match_sequential_runs():
    res = run_replications(
        "branin", "random", n_replications=3, n_queries=4, n_initial=6, scale=0.1, seed=10
    )
    assert res.regret.shape == (3, 10) and res.queries.shape == (3, 10, 2, 2)
    agree = 0
    for r in range(3):
        queries, winners, regret = _sequential("branin", "random", 10 + r, 6, 4, 0.1)
        # same random numbers: the same queries and the same answers, bit for bit
        torch.testing.assert_close(res.queries[r], queries, rtol=0, atol=0)
        assert torch.equal(res.winners[r], winners)
        # the recommendation depends on the fitted hyperparameters (batched vs sequential
        # L-BFGS-B): equal in all but rare near-ties
        agree += int((res.regret[r] - regret).abs().le(1e-9).sum())
    assert agree >= 0.8 * 30


def test_a_failed_batched_refit_keeps_the_hyperparameters(monkeypatch):
    starts, ends = [], []

    def fit(model):
        scale = model.covar_module.outputscale
        starts.append(scale.detach().clone())
        if len(starts) == 3:  # the third fit moves the hyperparameters, then fails
            with torch.no_grad():
                model.covar_module.outputscale = torch.full_like(scale, 123.0)
            raise torch.linalg.LinAlgError("cholesky failed")
        fit_evidence_batched(model)
        ends.append(model.covar_module.outputscale.detach().clone())

    monkeypatch.setattr("botorch_pref.loop.backends.fit_evidence_batched", fit)
    with pytest.warns(RuntimeWarning, match="fit failed after 3 answers"):
        res = run_replications(
            "branin", "random", n_replications=2, n_queries=2, n_initial=3, scale=0.1, seed=1
        )
    assert res.fits == 5 and torch.isfinite(res.regret).all()
    # the fourth fit starts where the second one ended: the failed third left nothing behind
    assert torch.equal(starts[3], ends[1])


def test_eubo_replications_run_and_start_like_sequential():
    res = run_replications(
        "branin", "eubo", n_replications=2, n_queries=3, n_initial=5, scale=0.1, seed=3
    )
    assert bool(torch.isfinite(res.regret).all()) and bool((res.regret >= 0).all())
    assert bool(((res.queries >= 0) & (res.queries <= 1)).all())
    assert res.seconds.shape == (8,) and res.fits == 8
    for r in range(2):
        queries, winners, _ = _sequential("branin", "random", 3 + r, 5, 0, 0.1)
        torch.testing.assert_close(res.queries[r, :5], queries, rtol=0, atol=0)
        assert torch.equal(res.winners[r, :5], winners)
    # acquisition queries are new designs, not copies of the random ones
    assert not torch.equal(res.queries[:, 5:], res.queries[:, :3])
    lr = res.log_regret_after(3)
    assert lr.shape == (2,) and bool(torch.isfinite(lr).all())
    assert math.isfinite(float(res.log_regret().mean()))


def test_choice_answers_enter_the_model_as_choices():
    kwargs = dict(n_replications=2, n_queries=2, q=3, n_initial=4, scale=0.1, seed=5)
    choice = run_replications("branin", "qeubo", answers="choice", **kwargs)
    pairs = run_replications("branin", "qeubo", answers="pairs", **kwargs)
    assert choice.answers == "choice" and pairs.answers == "pairs"
    # same random numbers: the same initial queries and answers either way
    torch.testing.assert_close(choice.queries[:, :4], pairs.queries[:, :4], rtol=0, atol=0)
    assert torch.equal(choice.winners[:, :4], pairs.winners[:, :4])
    assert bool(torch.isfinite(choice.regret).all())
    assert choice.queries.shape == (2, 6, 3, 2)


def test_champion_challenger_replications_reuse_each_champion():
    res = run_replications(
        "branin", "champion-challenger", n_replications=2, n_queries=2, n_initial=4,
        scale=0.1, seed=6,
    )  # fmt: skip
    for r in range(2):
        earlier = res.queries[r, :4].reshape(-1, 2)
        for k in (4, 5):
            champion = res.queries[r, k, 0]
            assert bool((earlier == champion).all(-1).any()), "the champion is a compared design"
            earlier = torch.cat([earlier, res.queries[r, k]])


def test_batched_champion_challenger_equals_per_member_values():
    from botorch_pref.acquisition import ChampionChallenger

    datasets = [_data(12, 20, 7), _data(20, 30, 8)]
    X, C = _stack(datasets)
    batch = PairwiseLaplaceGP(X, C, covar_module=make_covar_module(2, batch_shape=torch.Size([2])))
    champions = X[:, 0]
    Z = torch.rand(5, 2, 1, 2, dtype=DT, generator=torch.Generator().manual_seed(0))
    values = ChampionChallenger(batch, champions)(Z)
    for i, (Xi, Ci) in enumerate(datasets):
        single = PairwiseLaplaceGP(Xi, Ci, covar_module=make_covar_module(2))
        ref = ChampionChallenger(single, champions[i])(Z[:, i])
        torch.testing.assert_close(values[:, i], ref)
    with pytest.raises(ValueError, match="one per model batch member"):
        ChampionChallenger(batch, torch.zeros(3, 2, dtype=DT))


def test_run_replications_rejects_bad_input():
    with pytest.raises(ValueError, match="answers"):
        run_replications("branin", "qeubo", q=3, answers="votes", n_replications=1, n_queries=1)
    with pytest.raises(ValueError, match="strategy"):
        run_replications("branin", "champion", n_replications=2, n_queries=1, scale=0.1)
    with pytest.raises(ValueError, match="q = 2"):
        run_replications("branin", "eubo", q=4, n_replications=2, n_queries=1, scale=0.1)
    with pytest.raises(ValueError, match="n_replications"):
        run_replications("branin", "random", n_replications=0, n_queries=1, scale=0.1)
    with pytest.raises(ValueError, match="dtype"):
        run_replications("branin", "random", n_replications=1, n_queries=1, dtype=torch.int64)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_run_replications_on_cuda(dtype):
    kwargs = dict(n_replications=3, n_queries=2, n_initial=4, scale=0.1, seed=1, dtype=dtype)
    gpu = run_replications("branin", "eubo", device="cuda", **kwargs)
    assert gpu.device.startswith("cuda") and bool(torch.isfinite(gpu.regret).all())
    cpu = run_replications("branin", "eubo", **kwargs)
    # the random phase and its answers are the same numbers on either device
    torch.testing.assert_close(gpu.queries[:, :4], cpu.queries[:, :4], rtol=0, atol=0)
    assert torch.equal(gpu.winners[:, :4], cpu.winners[:, :4])
