"""PairwiseLaplaceGP as a BoTorch model, against BoTorch's PairwiseGP and brute force."""

from __future__ import annotations

import copy
import math
import warnings

import pytest
import torch
from botorch.acquisition.preference import (
    AnalyticExpectedUtilityOfBestOption,
    PairwiseBayesianActiveLearningByDisagreement,
    qExpectedUtilityOfBestOption,
)
from botorch.fit import fit_gpytorch_mll
from botorch.models import PairwiseGP
from botorch.models.pairwise_gp import PairwiseLaplaceMarginalLogLikelihood
from botorch.models.transforms.input import Normalize
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from botorch.sampling.pairwise_samplers import PairwiseSobolQMCNormalSampler
from gpytorch.kernels import AdditiveKernel, ConstantKernel, RBFKernel, ScaleKernel

from botorch_pref import LaplaceEvidence, PairwiseLaplaceGP, PairwiseProbit, PreferenceDataError
from botorch_pref.models.kernels import make_covar_module

from .helpers import random_comparisons


def plain_kernel(d: int, lengthscale: float = 0.4, outputscale: float = 1.5) -> ScaleKernel:
    """A kernel without priors, so that evidences of both models are comparable."""
    k = ScaleKernel(RBFKernel(ard_num_dims=d)).double()
    k.base_kernel.lengthscale = lengthscale
    k.outputscale = outputscale
    return k


def both_models(X, C, **kernel_kwargs):
    d = X.shape[-1]
    ours = PairwiseLaplaceGP(X, C, covar_module=plain_kernel(d, **kernel_kwargs))
    ref = PairwiseGP(X, C, covar_module=plain_kernel(d, **kernel_kwargs), jitter=1e-12)
    return ours, ref


def max_abs_z(model) -> float:
    f = model.utility
    C = model.comparisons
    return float(((f[C[:, 0]] - f[C[:, 1]]) / math.sqrt(2)).abs().max())


@pytest.fixture
def data():
    return random_comparisons(25, 40, seed=3, noise=1.0)


def test_agrees_with_pairwise_gp(data):
    X, C = data
    ours, ref = both_models(X, C)
    assert max_abs_z(ours) < 3  # PairwiseGP's clamp of z at +-3 is inactive here
    torch.testing.assert_close(ours.utility, ref.utility.detach(), atol=1e-6, rtol=0)
    Xt = torch.rand(7, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    p_ours, p_ref = ours.posterior(Xt), ref.posterior(Xt)
    torch.testing.assert_close(p_ours.mean, p_ref.mean.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(
        p_ours.covariance_matrix, p_ref.covariance_matrix.detach(), atol=1e-6, rtol=0
    )
    ref.train()
    ev_ref = PairwiseLaplaceMarginalLogLikelihood(ref.likelihood, ref)(
        ref(*ref.train_inputs), ref.train_targets
    )
    ev_ours = LaplaceEvidence(ours.likelihood, ours)()
    torch.testing.assert_close(ev_ours, ev_ref.detach(), atol=1e-6, rtol=0)


def test_unclamped_hazard_is_right_where_pairwise_gp_clamps():
    # Consistent answers with a large outputscale push |z| beyond 3 at the mode: PairwiseGP's
    # clamp then changes the likelihood's gradient. A brute-force maximisation of the exact
    # log posterior agrees with our mode.
    X, C = random_comparisons(10, 30, seed=1, noise=0.0)
    ours, ref = both_models(X, C, outputscale=50.0)
    assert max_abs_z(ours) > 3
    f = torch.zeros(10, dtype=torch.float64, requires_grad=True)
    K = ours.covar_module(X).to_dense().detach()
    L = torch.linalg.cholesky(K)
    opt = torch.optim.LBFGS(
        [f],
        max_iter=2000,
        tolerance_grad=1e-12,
        tolerance_change=1e-15,
        line_search_fn="strong_wolfe",
    )

    def closure():
        opt.zero_grad()
        alpha = torch.cholesky_solve(f.unsqueeze(-1), L).squeeze(-1)
        loss = -(ours.likelihood.log_prob(f[C[:, 0]] - f[C[:, 1]]).sum() - 0.5 * f @ alpha)
        loss.backward()
        return loss

    for _ in range(5):
        opt.step(closure)
    torch.testing.assert_close(ours.utility, f.detach(), atol=1e-4, rtol=1e-4)
    assert float((ref.utility.detach() - f.detach()).abs().max()) > 1e-2


def test_predicted_differences_invariant_to_utility_shift(data):
    # A constant kernel term adds prior uncertainty about the overall level of the utility:
    # no answer depends on it, so every predicted difference is unchanged.
    X, C = data
    base = plain_kernel(2)
    shifted = AdditiveKernel(copy.deepcopy(base), ConstantKernel().double())
    shifted.kernels[1].constant = torch.tensor(25.0, dtype=torch.float64)
    m0 = PairwiseLaplaceGP(X, C, covar_module=base)
    m1 = PairwiseLaplaceGP(X, C, covar_module=shifted)
    Xt = torch.rand(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    D = torch.zeros(5, 6, dtype=torch.float64)
    D[:, 0] = 1.0
    D[torch.arange(5), torch.arange(1, 6)] = -1.0
    for attr in ("mean", "covariance_matrix"):
        a, b = getattr(m0.posterior(Xt), attr), getattr(m1.posterior(Xt), attr)
        if attr == "mean":
            a, b = D @ a, D @ b
        else:
            a, b = D @ a @ D.T, D @ b @ D.T
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)
    # ... while the level's own uncertainty stays as wide as the prior's
    var0 = m0.posterior(Xt).variance
    var1 = m1.posterior(Xt).variance
    assert bool((var1 - var0 > 24.0).all())


def test_batched_posterior_equals_individual_posteriors(data):
    X, C = data
    model = PairwiseLaplaceGP(X, C)
    Xt = torch.rand(50, 2, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    post = model.posterior(Xt)
    assert post.mean.shape == (50, 2, 1)
    assert post.covariance_matrix.shape == (50, 2, 2)
    for b in (0, 17, 49):
        single = model.posterior(Xt[b])
        torch.testing.assert_close(post.mean[b], single.mean)
        torch.testing.assert_close(post.covariance_matrix[b], single.covariance_matrix)


def test_posterior_is_differentiable_in_X(data):
    X, C = data
    model = PairwiseLaplaceGP(X, C)
    Xt = torch.rand(3, 2, 2, dtype=torch.float64, requires_grad=True)
    post = model.posterior(Xt)
    (post.mean.sum() + post.covariance_matrix.sum()).backward()
    assert Xt.grad is not None and bool(torch.isfinite(Xt.grad).all())


def test_batch_model_equals_separate_models():
    members = [random_comparisons(12, 20, seed=s) for s in range(3)]
    Xb = torch.stack([m[0] for m in members])
    Cb = torch.stack([m[1] for m in members])
    batch = PairwiseLaplaceGP(Xb, Cb, covar_module=plain_kernel(2))
    assert batch.batch_shape == torch.Size([3])
    Xt = torch.rand(4, 2, dtype=torch.float64)
    post = batch.posterior(Xt)
    evid = batch.laplace_evidence()
    for b, (X, C) in enumerate(members):
        single = PairwiseLaplaceGP(X, C, covar_module=plain_kernel(2))
        torch.testing.assert_close(batch.utility[b], single.utility, atol=1e-8, rtol=0)
        torch.testing.assert_close(post.mean[b], single.posterior(Xt).mean, atol=1e-8, rtol=0)
        torch.testing.assert_close(evid[b], single.laplace_evidence().squeeze(), atol=1e-8, rtol=0)


def test_fit_gpytorch_mll_improves_evidence(data):
    X, C = data
    model = PairwiseLaplaceGP(X, C)
    mll = LaplaceEvidence(model.likelihood, model)
    before = float(mll().detach())
    fit_gpytorch_mll(mll)
    assert not model.training
    after = float(mll().detach())
    assert after > before
    # the cached posterior follows the fitted hyperparameters
    fresh = PairwiseLaplaceGP(X, C, covar_module=copy.deepcopy(model.covar_module))
    Xt = torch.rand(5, 2, dtype=torch.float64)
    torch.testing.assert_close(model.posterior(Xt).mean, fresh.posterior(Xt).mean)


def test_botorch_acquisitions_match_pairwise_gp(data):
    X, C = data
    ours, ref = both_models(X, C)
    Xq = torch.rand(20, 2, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    for acqf_cls in (AnalyticExpectedUtilityOfBestOption,):
        torch.testing.assert_close(
            acqf_cls(pref_model=ours)(Xq), acqf_cls(pref_model=ref)(Xq).detach(), atol=1e-6, rtol=0
        )
    vals = []
    for model in (ours, ref):
        sampler = SobolQMCNormalSampler(torch.Size([64]), seed=0)
        vals.append(qExpectedUtilityOfBestOption(pref_model=model, sampler=sampler)(Xq).detach())
    torch.testing.assert_close(vals[0], vals[1], atol=1e-5, rtol=0)
    vals = []
    for model in (ours, ref):
        torch.manual_seed(0)
        vals.append(PairwiseBayesianActiveLearningByDisagreement(pref_model=model)(Xq).detach())
    torch.testing.assert_close(vals[0], vals[1], atol=1e-5, rtol=0)
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    cand, value = optimize_acqf(
        AnalyticExpectedUtilityOfBestOption(pref_model=ours),
        bounds,
        q=2,
        num_restarts=2,
        raw_samples=32,
    )
    assert cand.shape == (2, 2) and bool(torch.isfinite(value))


def test_fantasize_and_condition_on_observations(data):
    X, C = data
    model = PairwiseLaplaceGP(X, C)
    Xnew = torch.rand(2, 2, dtype=torch.float64)
    sampler = PairwiseSobolQMCNormalSampler(sample_shape=torch.Size([4]), seed=0)
    fant = model.fantasize(Xnew, sampler=sampler)
    assert fant.batch_shape == torch.Size([4])
    assert fant.posterior(torch.rand(3, 2, dtype=torch.float64)).mean.shape == (4, 3, 1)
    # conditioning equals building a model on the combined data
    Y = torch.tensor([[1, 0]])
    cond = model.condition_on_observations(Xnew, Y)
    fresh = PairwiseLaplaceGP(
        torch.cat([X, Xnew]),
        torch.cat([C, Y + X.shape[0]]),
        covar_module=copy.deepcopy(model.covar_module),
    )
    torch.testing.assert_close(cond.utility, fresh.utility, atol=1e-8, rtol=0)
    assert cond.newton_iterations <= fresh.newton_iterations
    assert model.n == X.shape[0]  # the original is untouched


def test_preference_probability_matches_monte_carlo(data):
    X, C = data
    model = PairwiseLaplaceGP(X, C)
    X1 = torch.rand(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    X2 = torch.rand(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    prob = model.preference_probability(X1, X2)
    post = model.posterior(torch.stack([X1, X2], -2))
    g = post.rsample(torch.Size([200_000])).squeeze(-1)  # S x 3 x 2
    mc = model.likelihood.log_prob(g[..., 0] - g[..., 1]).exp().mean(0)
    torch.testing.assert_close(prob, mc, atol=5e-3, rtol=0)
    torch.testing.assert_close(model.preference_probability(X2, X1), 1 - prob)
    with pytest.raises(ValueError, match=r"X1 \(3, 2\) and X2 \(2, 2\) must have broadcast"):
        model.preference_probability(X1, X2[:2])


def test_duplicate_designs_share_a_finite_utility():
    X, C = random_comparisons(10, 20, seed=0)
    X = torch.cat([X, X[:3]])
    C = torch.cat([C, torch.tensor([[10, 4], [5, 11], [12, 1]])])
    for form in ("comparison", "design"):
        model = PairwiseLaplaceGP(X, C, form=form)
        u = model.utility
        assert bool(torch.isfinite(u).all())
        torch.testing.assert_close(u[10:], u[:3], atol=1e-6, rtol=0)


def test_float32_close_to_float64(data):
    X, C = data
    m64 = PairwiseLaplaceGP(X, C)
    m32 = PairwiseLaplaceGP(X.float(), C)
    assert m32.utility.dtype == torch.float32
    torch.testing.assert_close(m32.utility.double(), m64.utility, atol=1e-3, rtol=1e-3)
    Xt = torch.rand(4, 2)
    torch.testing.assert_close(
        m32.posterior(Xt).mean.double(), m64.posterior(Xt.double()).mean, atol=1e-3, rtol=1e-3
    )


@pytest.mark.parametrize("form", ["comparison", "design"])
def test_float32_mode_at_an_ill_conditioned_scale_matches_float64(form):
    # Outputscale 100 over noise 0.03 with a tie threshold: B's condition number is ~1e5, so a
    # float32 Newton step can be spoilt by rounding and halved to nothing; the mode must still be
    # float64's, not the point where the line search gave up.
    g = torch.Generator().manual_seed(23)
    X = torch.rand(9, 1, generator=g, dtype=torch.float64)
    C = torch.tensor([[2, 8], [3, 2], [6, 4], [3, 2], [3, 2]])
    found = {}
    for dtype in (torch.float64, torch.float32):
        lik = PairwiseProbit(noise_std=0.03, tie_threshold=3.0, tie_threshold_prior=False)
        model = PairwiseLaplaceGP(X, C, likelihood=lik, form=form)
        model.covar_module.base_kernel.lengthscale = 0.05
        model.covar_module.outputscale = 100.0
        model.to(dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # converged: no warning
            found[dtype] = (model.utility.double(), float(model.laplace_evidence().detach()))
    (u64, e64), (u32, e32) = found[torch.float64], found[torch.float32]
    torch.testing.assert_close(u32, u64, atol=1e-3, rtol=0)
    assert abs(e32 - e64) < 2e-3


def test_float32_beyond_its_range_says_so_and_names_the_remedy():
    # Outputscale 1000 over noise 0.01: float32 cannot hold B = I + R K R^T (entries ~1e7)
    # exactly, and its rounding makes B indefinite; float64 has no trouble.
    g = torch.Generator().manual_seed(135)
    X = torch.rand(10, 1, generator=g, dtype=torch.float64)
    C = torch.tensor([[2, 0], [6, 0], [0, 7], [0, 9]])
    for dtype in (torch.float64, torch.float32):
        kernel = make_covar_module(1)  # unbounded outputscale (PairwiseGP's stops at 200)
        model = PairwiseLaplaceGP(
            X, C, likelihood=PairwiseProbit(noise_std=0.01), covar_module=kernel
        )
        model.covar_module.base_kernel.lengthscale = 0.05
        model.covar_module.outputscale = 1000.0
        model.to(dtype)
        if dtype == torch.float64:
            assert bool(torch.isfinite(model.utility).all())
            continue
        with pytest.raises(torch.linalg.LinAlgError, match=r"float32.*Use float64"):
            model.utility


def test_input_transform_is_applied_to_train_and_test(data):
    X, C = data
    lo, hi = torch.tensor([-3.0, 10.0]), torch.tensor([5.0, 30.0])
    Xu = lo + (hi - lo) * X
    bounds = torch.stack([lo, hi]).double()
    tf = PairwiseLaplaceGP(Xu, C, input_transform=Normalize(d=2, bounds=bounds))
    plain = PairwiseLaplaceGP(X, C)
    torch.testing.assert_close(tf.utility, plain.utility)
    Xt = torch.rand(5, 2, dtype=torch.float64)
    torch.testing.assert_close(tf.posterior(lo + (hi - lo) * Xt).mean, plain.posterior(Xt).mean)


def test_prior_only_model_returns_the_prior():
    kernel = plain_kernel(2)
    model = PairwiseLaplaceGP(None, None, covar_module=kernel)
    Xt = torch.rand(4, 2, dtype=torch.float64)
    post = model.posterior(Xt)
    torch.testing.assert_close(post.mean.squeeze(-1), torch.zeros(4, dtype=torch.float64))
    torch.testing.assert_close(post.covariance_matrix, kernel(Xt).to_dense().detach())


@pytest.mark.parametrize(
    ("X", "C", "match"),
    [
        (torch.rand(5, 2), torch.tensor([[0, 5]]), "must lie in"),
        (torch.rand(5, 2), torch.tensor([[-1, 2]]), "must lie in"),
        (torch.rand(5, 2), torch.tensor([[2, 2]]), "with itself"),
        (torch.tensor([[0.0, float("nan")], [1.0, 1.0]]), torch.tensor([[0, 1]]), "NaN"),
        (torch.rand(5, 2), torch.zeros(0, 2, dtype=torch.long), "empty"),
        (torch.rand(5, 2), torch.tensor([[0, 1, 2]]), "m x 2"),
        (torch.rand(5), torch.tensor([[0, 1]]), "n x d"),
        (torch.randint(0, 3, (5, 2)), torch.tensor([[0, 1]]), "float32 or float64"),
        (torch.rand(5, 2), torch.tensor([[0.5, 1.0]]), "integer"),
        (torch.rand(2, 5, 2), torch.tensor([[[0, 1]]] * 3), "broadcast"),
    ],
)
def test_bad_input_raises_clear_error(X, C, match):
    with pytest.raises(PreferenceDataError, match=match):
        PairwiseLaplaceGP(X, C)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"max_iter": 0}, "max_iter must be a positive integer, got 0"),
        ({"max_iter": 2.5}, "max_iter must be a positive integer, got 2.5"),
        ({"max_iter": True}, "max_iter must be a positive integer, got True"),
        ({"tol": -1e-8}, "tol must be None or a finite number >= 0, got -1e-08"),
        ({"tol": float("nan")}, "tol must be None or a finite number >= 0, got nan"),
        ({"tol": "tight"}, "tol must be None or a finite number >= 0, got 'tight'"),
    ],
)
def test_bad_solver_options_raise_clear_error(data, options, match):
    """No Newton iteration at all would return the starting point as the mode, with a warning."""
    X, C = data
    with pytest.raises(ValueError, match=match):
        PairwiseLaplaceGP(X, C, **options)


def test_bad_input_to_set_train_data_leaves_model_unchanged(data):
    X, C = data
    model = PairwiseLaplaceGP(X, C)
    before = model.utility.clone()
    with pytest.raises(ValueError):
        model.set_train_data(X, torch.tensor([[0, 99]]))
    torch.testing.assert_close(model.utility, before)
    assert model.comparisons.shape == C.shape


def test_set_train_data_appended_warm_start(data):
    X, C = data
    model = PairwiseLaplaceGP(X, C)
    Xn = torch.cat([X, torch.rand(2, 2, dtype=torch.float64)])
    Cn = torch.cat([C, torch.tensor([[25, 3], [26, 25]])])
    model.set_train_data(Xn, Cn)
    fresh = PairwiseLaplaceGP(Xn, Cn)
    torch.testing.assert_close(model.utility, fresh.utility, atol=1e-8, rtol=0)


@pytest.mark.cuda
def test_cuda_matches_cpu(data):
    X, C = data
    cpu = PairwiseLaplaceGP(X, C)
    gpu = PairwiseLaplaceGP(X.cuda(), C.cuda())
    assert gpu.utility.device.type == "cuda"
    torch.testing.assert_close(gpu.utility.cpu(), cpu.utility, atol=1e-8, rtol=0)
    mll = LaplaceEvidence(gpu.likelihood, gpu)
    fit_gpytorch_mll(mll)
    Xt = torch.rand(100, 2, 2, dtype=torch.float64, device="cuda")
    assert gpu.posterior(Xt).mean.device.type == "cuda"


def test_condition_on_observations_after_lazy_set_train_data(data):
    X, C = data
    model = PairwiseLaplaceGP(X[:-2], C[(C < 23).all(-1)])
    model.set_train_data(X, C, update_model=False)
    cond = model.condition_on_observations(X[:2] + 0.01, torch.tensor([[0, 1]]))
    fresh = PairwiseLaplaceGP(
        torch.cat([X, X[:2] + 0.01]),
        torch.cat([C, torch.tensor([[25, 26]])]),
        covar_module=copy.deepcopy(model.covar_module),
    )
    torch.testing.assert_close(cond.utility, fresh.utility, atol=1e-8, rtol=0)


def test_posterior_rejects_bad_test_points(data):
    X, C = data
    model = PairwiseLaplaceGP(X, C)
    with pytest.raises(ValueError, match="NaN"):
        model.posterior(torch.tensor([[0.1, float("nan")]], dtype=torch.float64))
    with pytest.raises(ValueError, match="input dimensions"):
        model.posterior(torch.rand(3, 5, dtype=torch.float64))


def test_posterior_follows_a_replaced_likelihood_noise_level_or_kernel(data):
    """The cached mode is found again when what it depends on changes, not only when a
    parameter's value does: each change gives the posterior of a model built with it."""
    from botorch_pref.models.kernels import make_covar_module

    X, C = data
    Xt = torch.rand(5, X.shape[-1], dtype=X.dtype, generator=torch.Generator().manual_seed(1))

    def mean(model):
        return model.posterior(Xt).mean

    def check(model, **fresh):
        torch.testing.assert_close(mean(model), mean(PairwiseLaplaceGP(X, C, **fresh)))

    model = PairwiseLaplaceGP(X, C)
    mean(model)
    model.likelihood = PairwiseProbit(noise_std=0.1)
    check(model, likelihood=PairwiseProbit(noise_std=0.1))
    model = PairwiseLaplaceGP(X, C)
    mean(model)
    model.likelihood.noise_std = 0.1
    check(model, likelihood=PairwiseProbit(noise_std=0.1))
    d = X.shape[-1]
    model = PairwiseLaplaceGP(X, C, covar_module=make_covar_module(d, base_kernel="rbf"))
    mean(model)
    model.covar_module = make_covar_module(d, base_kernel="matern32")  # equal raw values
    check(model, covar_module=make_covar_module(d, base_kernel="matern32"))


def test_to_moves_the_data_with_the_hyperparameters(data):
    """``model.to(dtype)`` / ``.double()`` give the model built from converted data; integer
    test points are told to be cast, not the model."""
    X, C = data
    Xt = torch.rand(5, X.shape[-1], dtype=X.dtype, generator=torch.Generator().manual_seed(2))
    want = PairwiseLaplaceGP(X, C).posterior(Xt)
    for convert in (lambda m: m.to(torch.float64), lambda m: m.double()):
        model = PairwiseLaplaceGP(X.float(), C)
        model.posterior(Xt.float())  # a float32 mode, cached
        convert(model)
        assert model.datapoints.dtype == torch.float64
        got = model.posterior(Xt)
        torch.testing.assert_close(got.mean, want.mean)
        torch.testing.assert_close(got.variance, want.variance)
    with pytest.raises(RuntimeError, match=r"cast it with X.to\(torch.float64\)"):
        model.posterior(torch.zeros(2, X.shape[-1], dtype=torch.long))


def test_condition_on_observations_refuses_indices_outside_the_new_designs(data):
    X, C = data
    model = PairwiseLaplaceGP(X, C)
    new = torch.rand(2, X.shape[-1], dtype=X.dtype)
    for Y, bad in (([[0, -1]], -1), ([[-1, -1]], -1), ([[0, 2]], 2)):
        with pytest.raises(PreferenceDataError, match=f"from 0, got index {bad}"):
            model.condition_on_observations(new, torch.tensor(Y))
    with pytest.raises(RuntimeError, match="3 input dimensions, the model's data have 2"):
        model.condition_on_observations(torch.rand(2, 3, dtype=X.dtype), torch.tensor([[0, 1]]))
    assert model.n == X.shape[-2]  # unchanged
