# ruff: noqa: NPY002  (the tutorials seed and draw with numpy's legacy global generator)
"""BoTorch's preference tutorials, run with only the preference model's import swapped.

The two flows below follow BoTorch's tutorials step by step (same data generation, same calls
in the same order, the tutorials' ``SMOKE_TEST`` budgets as BoTorch's own tutorial tests use
them); the only change is the import line, which binds the tutorials' names ``PairwiseGP`` and
``PairwiseLaplaceMarginalLogLikelihood`` to :class:`~botorch_pref.PairwiseLaplaceGP` and
:class:`~botorch_pref.LaplaceEvidence`:

* "Bayesian optimization with pairwise comparison data"
  (https://botorch.org/docs/tutorials/preference_bo,
  ``tutorials/preference_bo/preference_bo.ipynb`` in pytorch/botorch): fit on noisy comparisons
  of a weighted-sum utility, Kendall tau on 1,000 test designs, then a loop of analytic EUBO
  (``optimize_acqf`` on float32 bounds) against random queries, refitting every query;
* "Bayesian Optimization with Preference Exploration"
  (https://botorch.org/docs/tutorials/bope, ``tutorials/bope/bope.ipynb``): an outcome GP on
  DTLZ2, preference exploration with EUBO-zeta and Random-f, the learned objective
  (``LearnedObjective``) in ``qSimpleRegret`` and ``qLogNoisyExpectedImprovement``.

The flows take the two classes as arguments so that ``python -m benchmarks.botorch_parity``
runs them side by side with BoTorch's ``PairwiseGP``; the tutorials' plotting cells are left out.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
import torch
from botorch.acquisition import GenericMCObjective, LearnedObjective
from botorch.acquisition.logei import qLogNoisyExpectedImprovement
from botorch.acquisition.monte_carlo import qSimpleRegret
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.fit import fit_gpytorch_mll
from botorch.models.deterministic import FixedSingleSampleModel
from botorch.models.gp_regression import SingleTaskGP
from botorch.models.transforms.input import Normalize
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from botorch.test_functions.multi_objective import DTLZ2
from botorch.utils.sampling import draw_sobol_samples
from gpytorch.mlls.exact_marginal_log_likelihood import ExactMarginalLogLikelihood
from scipy.stats import kendalltau

# The tutorials' import line, swapped:
# from botorch.models.pairwise_gp import PairwiseGP, PairwiseLaplaceMarginalLogLikelihood
from botorch_pref import LaplaceEvidence as PairwiseLaplaceMarginalLogLikelihood
from botorch_pref import PairwiseLaplaceGP as PairwiseGP
from botorch_pref.runtime import entry_threads

MODEL = (PairwiseGP, PairwiseLaplaceMarginalLogLikelihood)


# ------------------------------------------------------------------------ preference_bo
def utility(X):
    """Given X, output corresponding utility (i.e., the latent function)"""
    weighted_X = X * torch.sqrt(torch.arange(X.size(-1), dtype=torch.float) + 1)
    return torch.sum(weighted_X, dim=-1)


def generate_data(n, dim=2):
    """Generate data X and y"""
    X = torch.rand(n, dim, dtype=torch.float64)
    return X, utility(X)


def generate_comparisons(y, n_comp, noise=0.1, replace=False):
    """Create pairwise comparisons with noise"""
    all_pairs = np.array(list(combinations(range(y.shape[0]), 2)))
    comp_pairs = all_pairs[np.random.choice(range(len(all_pairs)), n_comp, replace=replace)]
    c0 = y[comp_pairs[:, 0]] + np.random.standard_normal(len(comp_pairs)) * noise
    c1 = y[comp_pairs[:, 1]] + np.random.standard_normal(len(comp_pairs)) * noise
    reverse_comp = (c0 < c1).numpy()
    comp_pairs[reverse_comp, :] = np.flip(comp_pairs[reverse_comp, :], 1)
    return torch.tensor(comp_pairs).long()


def preference_bo_fit(model_cls, mll_cls, seed=123, n=50, m=100, n_kendall=1000, dim=4):
    """The tutorial's first part: fit on ``m`` comparisons of ``n`` designs; Kendall tau.

    ``seed`` is the tutorial's ``torch.manual_seed(123)``; numpy is seeded with it as well (the
    tutorial leaves numpy unseeded here), so that runs repeat.
    """
    torch.manual_seed(seed)
    np.random.seed(seed)
    noise = 0.1
    train_X, train_y = generate_data(n, dim=dim)
    train_comp = generate_comparisons(train_y, m, noise=noise)
    model = model_cls(train_X, train_comp, input_transform=Normalize(d=train_X.shape[-1]))
    mll = mll_cls(model.likelihood, model)
    mll = fit_gpytorch_mll(mll)
    test_X, test_y = generate_data(n_kendall, dim=dim)
    pred_y = model.posterior(test_X).mean.squeeze().detach().numpy()
    return kendalltau(pred_y, test_y).correlation


def preference_bo_loop(
    model_cls,
    mll_cls,
    trials=range(2),
    num_batches=2,
    raw_samples=8,
    num_restarts=3,
    algos=("EUBO", "rand"),
    dim=4,
):
    """The tutorial's BO loop (``NUM_TRIALS`` seeds ``trials``, ``NUM_BATCHES`` queries);
    returns ``{algo: [best observed value after each query, per trial]}``. The defaults are
    the tutorial's ``SMOKE_TEST`` budgets."""
    noise, q, q_comp = 0.1, 2, 1

    def init_and_fit_model(X, comp):
        model = model_cls(X, comp, input_transform=Normalize(d=X.shape[-1]))
        mll = mll_cls(model.likelihood, model)
        fit_gpytorch_mll(mll)
        return mll, model

    def make_new_data(X, next_X, comps, q_comp):
        next_X = next_X.to(X)
        next_y = utility(next_X)
        next_comps = generate_comparisons(next_y, n_comp=q_comp, noise=noise)
        comps = torch.cat([comps, next_comps + X.shape[-2]])
        X = torch.cat([X, next_X])
        return X, comps

    best_vals = {algo: [] for algo in algos}
    for i in trials:
        torch.manual_seed(i)
        np.random.seed(i)
        data, models = {}, {}
        init_X, init_y = generate_data(q, dim=dim)
        comparisons = generate_comparisons(init_y, q_comp, noise=noise)
        bounds = torch.stack([torch.zeros(dim), torch.ones(dim)])  # float32, as the tutorial
        for algo in algos:
            best_vals[algo].append([])
            data[algo] = (init_X, comparisons)
            _, models[algo] = init_and_fit_model(init_X, comparisons)
            best_vals[algo][-1].append(utility(init_X).max().item())
        for _ in range(1, num_batches + 1):
            for algo in algos:
                model = models[algo]
                if algo == "EUBO":
                    acq_func = AnalyticExpectedUtilityOfBestOption(pref_model=model)
                    next_X, _acq_val = optimize_acqf(
                        acq_function=acq_func,
                        bounds=bounds,
                        q=q,
                        num_restarts=num_restarts,
                        raw_samples=raw_samples,
                    )
                else:
                    next_X, _ = generate_data(q, dim=dim)
                X, comps = data[algo]
                X, comps = make_new_data(X, next_X, comps, q_comp)
                data[algo] = (X, comps)
                _, models[algo] = init_and_fit_model(X, comps)
                best_vals[algo][-1].append(utility(X).max().item())
    return best_vals


# --------------------------------------------------------------------------------- bope
def neg_l1_dist(Y, X=None):
    """Negative L1 distance from a Pareto optimal points"""
    if len(Y.shape) == 1:
        Y = Y.unsqueeze(0)
    dist = torch.cdist(
        Y, torch.full(Y.shape[-1:], fill_value=0.5, dtype=Y.dtype).unsqueeze(0), p=1
    ).squeeze(-1)
    return -dist


def gen_comps(util):
    """Given an 1-d tensor of utility, create pairwise comparisons between adjacent items."""
    util = util.reshape(-1, 2)
    comps = torch.arange(util.numel()).reshape(-1, 2)
    flip = util[:, 0] < util[:, 1]
    comps[flip, [0]], comps[flip, [1]] = comps[flip, [1]], comps[flip, [0]]
    return comps


def bope(
    model_cls,
    mll_cls,
    n_check_post_mean=1,
    num_restarts=2,
    num_outcome_samples=2,
    raw_samples=4,
    batch_limit=2,
    every_n_comps=3,
    seed=0,
):
    """The tutorial's closed BOPE loop (defaults: its ``SMOKE_TEST`` budgets).

    Returns:
        ``(within_session_results, exp_candidate_results)`` as the tutorial builds them.
    """
    problem = DTLZ2(dim=5, num_objectives=4)
    util_func = neg_l1_dist

    def fit_outcome_model(X, Y):
        outcome_model = SingleTaskGP(train_X=X, train_Y=Y, input_transform=Normalize(d=X.shape[-1]))
        mll = ExactMarginalLogLikelihood(outcome_model.likelihood, outcome_model)
        fit_gpytorch_mll(mll)
        return outcome_model

    def fit_pref_model(Y, comps):
        model = model_cls(Y, comps, input_transform=Normalize(d=Y.shape[-1]))
        mll = mll_cls(model.likelihood, model)
        fit_gpytorch_mll(mll)
        return model

    def gen_rand_X(problem, n):
        return draw_sobol_samples(bounds=problem.bounds, n=1, q=n).squeeze(0)

    def generate_random_exp_data(problem, n):
        X = gen_rand_X(problem, n)
        return X, problem(X)

    def generate_random_pref_data(outcome_model, n):
        X = gen_rand_X(problem, 2 * n)
        Y = outcome_model.posterior(X).sample().squeeze(0)
        return Y, gen_comps(util_func(Y))

    def run_pref_learn(outcome_model, train_Y, train_comps, n_comps, pe_strategy):
        for _ in range(n_comps):
            pref_model = fit_pref_model(train_Y, train_comps)
            if pe_strategy == "EUBO-zeta":
                one_sample_outcome_model = FixedSingleSampleModel(model=outcome_model)
                acqf = AnalyticExpectedUtilityOfBestOption(
                    pref_model=pref_model, outcome_model=one_sample_outcome_model
                )
                cand_X, _acqf_val = optimize_acqf(
                    acq_function=acqf,
                    q=2,
                    bounds=problem.bounds,
                    num_restarts=num_restarts,
                    raw_samples=raw_samples,
                    options={"batch_limit": batch_limit},
                )
                cand_Y = one_sample_outcome_model(cand_X)
            elif pe_strategy == "Random-f":
                cand_X = gen_rand_X(problem, n=2)
                cand_Y = outcome_model.posterior(cand_X).sample().squeeze(0)
            else:
                raise RuntimeError("Unknown preference exploration strategy!")
            cand_Y = cand_Y.detach().clone()
            cand_comps = gen_comps(util_func(cand_Y))
            train_comps = torch.cat((train_comps, cand_comps + train_Y.shape[0]))
            train_Y = torch.cat((train_Y, cand_Y))
        return train_Y, train_comps

    def gen_exp_cand(outcome_model, objective, q, acqf_name):
        sampler = SobolQMCNormalSampler(sample_shape=torch.Size([num_outcome_samples]))
        if acqf_name == "qNEI":
            acq_func = qLogNoisyExpectedImprovement(
                model=outcome_model,
                objective=objective,
                X_baseline=X,
                sampler=sampler,
                prune_baseline=True,
            )
        elif acqf_name == "posterior_mean":
            acq_func = qSimpleRegret(model=outcome_model, sampler=sampler, objective=objective)
        else:
            raise RuntimeError("Unknown acquisition function name!")
        candidates, _ = optimize_acqf(
            acq_function=acq_func,
            q=q,
            bounds=problem.bounds,
            num_restarts=num_restarts,
            raw_samples=raw_samples,
            options={"batch_limit": batch_limit},
            sequential=True,
        )
        return candidates

    def find_max_posterior_mean(outcome_model, train_Y, train_comps):
        pref_model = fit_pref_model(train_Y, train_comps)
        pref_obj = LearnedObjective(pref_model=pref_model)
        post_mean_cand_X = gen_exp_cand(outcome_model, pref_obj, q=1, acqf_name="posterior_mean")
        post_mean_util = util_func(problem(post_mean_cand_X)).item()
        return {"n_comps": train_comps.shape[0], "util": post_mean_util}

    within_session_results, exp_candidate_results = [], []
    torch.manual_seed(seed)
    np.random.seed(seed)
    X, Y = generate_random_exp_data(problem, 8)
    outcome_model = fit_outcome_model(X, Y)
    init_train_Y, init_train_comps = generate_random_pref_data(outcome_model, n=1)
    for pe_strategy in ["EUBO-zeta", "Random-f"]:
        train_Y, train_comps = init_train_Y.clone(), init_train_comps.clone()
        within_result = find_max_posterior_mean(outcome_model, train_Y, train_comps)
        within_result.update({"pe_strategy": pe_strategy})
        within_session_results.append(within_result)
        for _ in range(n_check_post_mean):
            train_Y, train_comps = run_pref_learn(
                outcome_model, train_Y, train_comps, every_n_comps, pe_strategy
            )
            within_result = find_max_posterior_mean(outcome_model, train_Y, train_comps)
            within_result.update({"pe_strategy": pe_strategy})
            within_session_results.append(within_result)
        pref_model = fit_pref_model(train_Y, train_comps)
        pref_obj = LearnedObjective(pref_model=pref_model)
        exp_cand_X = gen_exp_cand(outcome_model, pref_obj, q=1, acqf_name="qNEI")
        qneiuu_util = util_func(problem(exp_cand_X)).item()
        exp_candidate_results.append({"util": qneiuu_util, "strategy": pe_strategy})
    true_obj = GenericMCObjective(util_func)
    true_obj_cand_X = gen_exp_cand(outcome_model, true_obj, q=1, acqf_name="qNEI")
    exp_candidate_results.append(
        {"util": util_func(problem(true_obj_cand_X)).item(), "strategy": "True Utility"}
    )
    _, random_Y = generate_random_exp_data(problem, 1)
    exp_candidate_results.append(
        {"util": util_func(random_Y).item(), "strategy": "Random Experiment"}
    )
    return within_session_results, exp_candidate_results


# -------------------------------------------------------------------------------- tests
@pytest.fixture(autouse=True)
def one_thread():
    """The tutorials' BoTorch code (outcome GPs, acquisition optimisation) on one intra-op
    thread: on shared cores, spinning OpenMP threads make it several times slower."""
    with entry_threads(1, per_thread=True):  # leaves PairwiseGP's LU alone (runtime docs)
        yield


def test_preference_bo_tutorial_fit_ranks_the_test_designs():
    """The tutorial's model fit at its full size (50 designs, 100 comparisons); its printed
    Kendall tau with PairwiseGP is about 0.9."""
    tau = preference_bo_fit(*MODEL)
    assert tau > 0.85


def test_preference_bo_tutorial_loop_runs():
    """The EUBO loop on the tutorial's float32 bounds (smoke budgets): every query is a pair
    of new designs and the best value never decreases."""
    best = preference_bo_loop(*MODEL)
    for algo in ("EUBO", "rand"):
        assert len(best[algo]) == 2
        for curve in best[algo]:
            assert len(curve) == 3 and all(np.diff(curve) >= 0)
            assert all(np.isfinite(curve))


def test_bope_tutorial_runs():
    """The BOPE tutorial (smoke budgets): both preference-exploration strategies, the learned
    objective in qSimpleRegret and qLogNEI; utilities are negative L1 distances (<= 0)."""
    within, experiments = bope(*MODEL)
    assert [r["pe_strategy"] for r in within] == ["EUBO-zeta"] * 2 + ["Random-f"] * 2
    assert [r["n_comps"] for r in within] == [1, 4, 1, 4]
    assert [r["strategy"] for r in experiments] == [
        "EUBO-zeta",
        "Random-f",
        "True Utility",
        "Random Experiment",
    ]
    for r in within + experiments:
        assert np.isfinite(r["util"]) and r["util"] <= 0
