"""Edge cases of the fused acquisition functions against BoTorch's and the posterior path.

Each test pins a combination that the fused moments (:mod:`botorch_pref.acquisition.moments`)
once got wrong: a kernel that sees only some inputs, an acquisition function that outlives a
change of its model, bad compared designs, and designs far from the origin in float32.
"""

from __future__ import annotations

import pytest
import torch
from botorch.acquisition.objective import ScalarizedPosteriorTransform
from botorch.acquisition.preference import (
    AnalyticExpectedUtilityOfBestOption,
    qExpectedUtilityOfBestOption,
)
from botorch.sampling.normal import SobolQMCNormalSampler
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel

from botorch_pref import PairwiseLaplaceGP
from botorch_pref.acquisition import (
    ChampionChallenger,
    LookaheadBestCompared,
    answer_update,
    make_eubo,
    make_qeubo,
    moment_factors,
    moments_from_factors,
    rbf_predictive_moments,
)

from .helpers import random_comparisons

DT = torch.float64


def _lookahead_on_the_posterior(acqf: LookaheadBestCompared, pairs: torch.Tensor) -> torch.Tensor:
    """The lookahead's value from ``model.posterior`` (the general path's formula)."""
    model, compared = acqf.model, acqf.compared
    post = model.posterior(torch.cat([pairs, compared.expand(pairs.shape[0], -1, -1)], dim=-2))
    mean, cov = post.mean.squeeze(-1), post.distribution.covariance_matrix
    p, q, first, second = answer_update(mean, cov, acqf.noise_scale)
    return p * first.amax(-1) + q * second.amax(-1)


@pytest.mark.parametrize("base", ["rbf", "rbf_ard", "matern52"])
def test_fused_acquisitions_respect_the_scale_kernels_active_dims(base):
    # ScaleKernel(..., active_dims=[0, 2]) sees inputs 0 and 2 of three; the fused moments must
    # not use input 1 (an isotropic kernel silently did, an ARD one failed on the shapes).
    X, C = random_comparisons(14, 20, d=3, seed=2)
    inner = {
        "rbf": RBFKernel(),
        "rbf_ard": RBFKernel(ard_num_dims=2),
        "matern52": MaternKernel(nu=2.5),
    }[base]
    kernel = ScaleKernel(inner, active_dims=torch.tensor([0, 2])).to(DT)
    kernel.base_kernel.lengthscale = 0.3
    model = PairwiseLaplaceGP(X, C, covar_module=kernel).eval()
    g = torch.Generator().manual_seed(0)
    pairs = torch.rand(5, 2, 3, generator=g, dtype=DT)
    torch.testing.assert_close(
        make_eubo(model)(pairs), AnalyticExpectedUtilityOfBestOption(pref_model=model)(pairs)
    )
    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([32]), seed=1)
    torch.testing.assert_close(
        make_qeubo(model, num_samples=32, seed=1)(pairs),
        qExpectedUtilityOfBestOption(pref_model=model, sampler=sampler)(pairs),
    )
    identity = ScalarizedPosteriorTransform(weights=torch.ones(1, dtype=DT))
    challengers = pairs[:, :1]
    torch.testing.assert_close(
        ChampionChallenger(model, X[:1])(challengers),
        ChampionChallenger(model, X[:1], posterior_transform=identity)(challengers),
    )
    lookahead = LookaheadBestCompared(model, X[:3])
    torch.testing.assert_close(lookahead(pairs), _lookahead_on_the_posterior(lookahead, pairs))


def test_fused_lookahead_follows_its_model_after_a_change():
    # Built before the model changes, the fused lookahead must value pairs under the model's
    # current posterior, as its posterior path and the other acquisition functions do.
    X, C = random_comparisons(12, 15, seed=1)
    model = PairwiseLaplaceGP(X, C).eval()
    acqf = LookaheadBestCompared(model, X[:3])
    pairs = torch.rand(4, 2, 2, generator=torch.Generator().manual_seed(1), dtype=DT)
    torch.testing.assert_close(acqf(pairs), _lookahead_on_the_posterior(acqf, pairs))
    model.covar_module.base_kernel.lengthscale = 0.1  # new hyperparameters
    torch.testing.assert_close(acqf(pairs), _lookahead_on_the_posterior(acqf, pairs))
    X2, C2 = random_comparisons(12, 30, seed=5)
    model.set_train_data(X2, C2)  # new data
    torch.testing.assert_close(acqf(pairs), _lookahead_on_the_posterior(acqf, pairs))


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_lookahead_refuses_compared_designs_that_are_not_finite(bad):
    # The fused path returned NaN for every pair; the posterior path raised only when called.
    X, C = random_comparisons(12, 15, seed=1)
    model = PairwiseLaplaceGP(X, C).eval()
    compared = X[:3].clone()
    compared[1, 0] = bad
    with pytest.raises(ValueError, match="compared contains NaN or infinite values"):
        LookaheadBestCompared(model, compared)


def test_fused_moments_in_float32_keep_their_accuracy_far_from_the_origin():
    # Designs at 100 + [0, 1) with lengthscale 0.2 sit about 500 lengthscales from the origin.
    # Squared distances as |z|^2 + |z'|^2 - 2 z.z' then cancel ~2.5e5 down to ~1, which float32
    # cannot do; GPyTorch centres the designs first, and so must the fused moments.
    X, C = random_comparisons(20, 30, seed=1)
    model = PairwiseLaplaceGP((X + 100.0).float(), C)
    model.covar_module.base_kernel.lengthscale = 0.2
    model.eval()
    g = torch.Generator().manual_seed(0)
    pairs = (torch.rand(50, 2, 2, generator=g, dtype=DT) + 100.0).float().requires_grad_(True)
    moments = rbf_predictive_moments(model, pairs)
    posterior = model.posterior(pairs)
    torch.testing.assert_close(moments.mean, posterior.mean.squeeze(-1), rtol=1e-4, atol=1e-4)
    fused, reference = make_eubo(model), AnalyticExpectedUtilityOfBestOption(pref_model=model)
    value, (grad,) = fused(pairs), torch.autograd.grad(fused(pairs).sum(), pairs)
    expected, (grad_ref,) = reference(pairs), torch.autograd.grad(reference(pairs).sum(), pairs)
    torch.testing.assert_close(value, expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(grad, grad_ref, rtol=1e-3, atol=1e-3)
    lookahead = LookaheadBestCompared(model, model.datapoints[:4])
    torch.testing.assert_close(
        lookahead(pairs), _lookahead_on_the_posterior(lookahead, pairs), rtol=1e-4, atol=1e-4
    )
    # designs spread over the unit cube are not shifted: their results stay as they were
    assert moment_factors(PairwiseLaplaceGP(X.float(), C)).centre is None


def test_a_batched_constant_mean_shifts_each_member_by_its_own_constant():
    """A ``ConstantMean`` with the model's batch shape: member ``b``'s means move by ``c_b``,
    on the posterior path and in the fused moments (it once shifted the ``q`` points instead,
    silently when ``q`` equalled the batch size)."""
    from gpytorch.means import ConstantMean

    gen = torch.Generator().manual_seed(3)
    X = torch.rand(2, 6, 2, generator=gen, dtype=DT)
    C = torch.tensor([[0, 1], [2, 3], [4, 5]]).expand(2, 3, 2)
    kernel = ScaleKernel(RBFKernel(ard_num_dims=2, batch_shape=torch.Size([2])))
    model = PairwiseLaplaceGP(X, C, covar_module=kernel.to(DT)).eval()
    points = torch.rand(2, 2, 2, generator=gen, dtype=DT)  # q = 2 = the batch size
    with torch.no_grad():
        base = model.posterior(points).mean.squeeze(-1)
        mean_module = ConstantMean(batch_shape=torch.Size([2])).to(DT)
        mean_module.constant.copy_(torch.tensor([1.0, -1.0], dtype=DT))
        model.mean_module = mean_module
        shifted = model.posterior(points).mean.squeeze(-1)
        fused = moments_from_factors(moment_factors(model), points).mean
    want = torch.tensor([[1.0, 1.0], [-1.0, -1.0]], dtype=DT)
    torch.testing.assert_close(shifted - base, want)
    torch.testing.assert_close(fused, shifted)
