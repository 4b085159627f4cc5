"""Expectation propagation (``inference="ep"``) against independent references.

The exact posterior and evidence of a few comparisons are computed by importance sampling and
by quadrature; the evidence's gradient by finite differences of converged runs.
"""

from __future__ import annotations

import pytest
import torch
from botorch.fit import fit_gpytorch_mll

from botorch_pref import PairwiseLaplaceGP
from botorch_pref.data import PreferenceData
from botorch_pref.inference.ep import comparison_rows, laplace_sites, run_ep
from botorch_pref.inference.rows import row_gram
from botorch_pref.likelihoods import PairwiseLogit, Ranking
from botorch_pref.models.data import PreferenceInputError
from botorch_pref.models.evidence import LaplaceEvidence

from .helpers import (
    assert_ep_closer,
    monte_carlo_evidence,
    random_comparisons,
)

DT = torch.float64
X5 = torch.linspace(0, 1, 5, dtype=DT).unsqueeze(-1)
# a repeated pair (0 beat 1 twice) and a cycle (0 > 1 > 2 > 3, 3 > 1)
C8 = torch.tensor([[0, 1], [1, 2], [2, 3], [0, 3], [4, 0], [3, 1], [0, 1], [2, 4]])


def _model(inference: str, noise: float, outputscale: float, **kwargs) -> PairwiseLaplaceGP:
    model = PairwiseLaplaceGP(X5, C8, inference=inference, **kwargs)
    model.likelihood.noise_std = noise
    model.covar_module.outputscale = outputscale
    model.covar_module.base_kernel.lengthscale = 0.3
    return model


def _log_likelihood(f: torch.Tensor, model: PairwiseLaplaceGP) -> torch.Tensor:
    """log p(C8 | f) for draws ``f`` (``N x 5``)."""
    d = f[:, C8[:, 0]] - f[:, C8[:, 1]]
    return torch.special.log_ndtr(d / model.likelihood.scale).sum(-1)


@pytest.mark.parametrize(("noise", "outputscale"), [(1.0, 4.0), (0.1, 4.0)])
def test_ep_posterior_is_closer_to_the_exact_one_than_laplace(noise, outputscale):
    assert_ep_closer(
        lambda inference: _model(inference, noise, outputscale),
        _log_likelihood,
        X5,
        ep_bounds=(0.003, 0.04),
        factors=(3, 3),
    )


def test_ep_evidence_is_closer_to_the_exact_one_than_laplace():
    # log Z = log E_prior[prod Phi(d / s)]
    model = _model("laplace", 1.0, 4.0)
    exact = monte_carlo_evidence(model, _log_likelihood, X5)
    laplace = model.laplace_evidence().item()
    ep = _model("ep", 1.0, 4.0).laplace_evidence().item()
    assert abs(ep - exact) < 0.005
    assert abs(laplace - exact) > 0.02


def test_ep_evidence_gradient_matches_finite_differences():
    def evidence(raw_outputscale: float, raw_lengthscale: float, grad: bool = False):
        model = _model("ep", 0.5, 2.0, tol=1e-12)  # the fit's looser tolerance would blur it
        with torch.no_grad():
            model.covar_module.raw_outputscale.fill_(raw_outputscale)
            model.covar_module.base_kernel.raw_lengthscale.fill_(raw_lengthscale)
        value = model.laplace_evidence()
        if not grad:
            return value.item()
        value.backward()
        kernel = model.covar_module
        return kernel.raw_outputscale.grad.item(), kernel.base_kernel.raw_lengthscale.grad.item()

    a, b, h = 0.7, -0.9, 1e-5
    g_a, g_b = evidence(a, b, grad=True)
    assert g_a == pytest.approx((evidence(a + h, b) - evidence(a - h, b)) / (2 * h), rel=1e-5)
    assert g_b == pytest.approx((evidence(a, b + h) - evidence(a, b - h)) / (2 * h), rel=1e-5)


def test_ep_batched_members_with_padding_equal_separate_models():
    X1, C1 = random_comparisons(12, 20, d=2, seed=1)
    X2, C2 = random_comparisons(12, 14, d=2, seed=2)
    padded = torch.cat([C2, torch.full((6, 2), -1)])
    batched = PairwiseLaplaceGP(
        torch.stack([X1, X2]), torch.stack([C1, padded]), inference="ep"
    ).eval()
    Xt = torch.rand(2, 7, 2, generator=torch.Generator().manual_seed(3), dtype=DT)
    post = batched.posterior(Xt)
    evidence = batched.laplace_evidence()
    evidence.sum().backward()  # padding once made the padded member's gradient NaN
    grad = batched.covar_module.base_kernel.raw_lengthscale.grad
    for r, (X, C) in enumerate([(X1, C1), (X2, C2)]):
        single = PairwiseLaplaceGP(X, C, inference="ep").eval()
        single.laplace_evidence().backward()
        single_grad = single.covar_module.base_kernel.raw_lengthscale.grad
        # EP stops at its tolerance, batched and alone after different sweeps
        torch.testing.assert_close(grad[r], single_grad, atol=1e-6, rtol=1e-5)
        ref = single.posterior(Xt[r])
        torch.testing.assert_close(post.mean[r], ref.mean, atol=1e-7, rtol=1e-6)
        torch.testing.assert_close(
            post.distribution.covariance_matrix[r], ref.distribution.covariance_matrix,
            atol=1e-7, rtol=1e-6,
        )  # fmt: skip
        assert evidence[r].item() == pytest.approx(single.laplace_evidence().item(), abs=1e-7)


def test_ep_hyperparameter_fit_raises_the_ep_evidence():
    X, C = random_comparisons(15, 30, d=2, seed=5)
    model = PairwiseLaplaceGP(X, C, inference="ep")
    mll = LaplaceEvidence(model.likelihood, model)  # EP's evidence plus the log-priors
    before = mll().item()
    fit_gpytorch_mll(mll)
    assert model.inference == "ep"
    assert mll().item() > before + 0.1
    assert torch.isfinite(model.posterior(X).mean).all()


def test_ep_in_float32_agrees_with_float64():
    X, C = random_comparisons(15, 30, d=2, seed=6)
    Xt = torch.rand(8, 2, generator=torch.Generator().manual_seed(0), dtype=DT)
    m64 = PairwiseLaplaceGP(X, C, inference="ep").eval()
    m32 = PairwiseLaplaceGP(X.float(), C, inference="ep").eval()
    p64, p32 = m64.posterior(Xt), m32.posterior(Xt.float())
    torch.testing.assert_close(p32.mean.double(), p64.mean, atol=2e-4, rtol=1e-3)
    torch.testing.assert_close(p32.variance.double(), p64.variance, atol=2e-4, rtol=1e-3)
    assert m32.laplace_evidence().item() == pytest.approx(m64.laplace_evidence().item(), abs=1e-3)


def test_ep_refuses_what_it_does_not_model():
    X, C = random_comparisons(6, 8, d=2, seed=7)
    with pytest.raises(ValueError, match="inference must be one of"):
        PairwiseLaplaceGP(X, C, inference="vb")
    with pytest.raises(PreferenceInputError, match="probit pair likelihood"):
        PairwiseLaplaceGP(X, C, likelihood=PairwiseLogit(), inference="ep")
    choices = PreferenceData.from_comparisons(C)
    choices.add_choice([0, 1, 2], chosen=1)
    with pytest.raises(PreferenceInputError, match="probit pair likelihood"):
        PairwiseLaplaceGP(X, choices, likelihood=Ranking(), inference="ep")
    # pairs given as PreferenceData are pairs
    model = PairwiseLaplaceGP(X, PreferenceData.from_comparisons(C), inference="ep").eval()
    reference = PairwiseLaplaceGP(X, C, inference="ep").eval()
    torch.testing.assert_close(model.posterior(X).mean, reference.posterior(X).mean)
    model = PairwiseLaplaceGP(X, C, inference="ep")
    model.likelihood = PairwiseLogit()  # replaced later: refused on next use, not ignored
    with pytest.raises(PreferenceInputError, match="probit pair likelihood"):
        model.posterior(X)


def _sites_at_the_mode(model: PairwiseLaplaceGP):
    """``(K_C, likelihood, tau, nu, real)``: EP's problem for a Laplace model, sites at its
    mode."""
    rows, real, _ = comparison_rows(model.engine.structure)
    with torch.no_grad():
        K = model.covar_module(model.datapoints).to_dense().unsqueeze(0)
        K_C = row_gram(K, rows)[1]
        f = model.utility.unsqueeze(0)  # the Laplace mode
    c = f.gather(-1, rows[..., 0]) - f.gather(-1, rows[..., 1])
    _, grad, neg_hess = model.likelihood.derivatives(c)
    return (K_C, model.likelihood, *laplace_sites(grad, neg_hess, c, real), real)


@pytest.mark.parametrize(
    ("n", "m", "noise", "outputscale", "lengthscale", "seed"),
    [(10, 72, 0.33, 20.6, 0.28, 7), (5, 23, 0.21, 37.3, 0.16, 32)],
)
def test_ep_converges_where_undamped_sweeps_oscillate(n, m, noise, outputscale, lengthscale, seed):
    # Many answers about few designs and a large outputscale: parallel EP moving the sites all
    # the way oscillates without end here (500 sweeps); the later half-way sweeps converge.
    X, C = random_comparisons(n, m, d=2, noise=noise, seed=seed)
    model = PairwiseLaplaceGP(X, C)
    model.covar_module.outputscale = outputscale
    model.covar_module.base_kernel.lengthscale = lengthscale
    K_C, likelihood, tau, nu, real = _sites_at_the_mode(model)
    sites = run_ep(K_C, likelihood, tau, nu, real, max_sweeps=120)
    assert bool(sites.converged.all()) and sites.sweeps < 120
    # a fixed point: one more sweep from it moves nothing
    again = run_ep(K_C, likelihood, sites.tau, sites.nu, real, max_sweeps=1)
    assert bool(again.converged.all())
    with pytest.raises(ValueError, match="damping"):
        run_ep(K_C, likelihood, tau, nu, real, damping=0.0)


@pytest.mark.cuda
def test_ep_on_cuda_matches_cpu():
    X, C = random_comparisons(15, 30, d=2, seed=8)
    Xt = torch.rand(8, 2, generator=torch.Generator().manual_seed(0), dtype=DT)
    cpu = PairwiseLaplaceGP(X, C, inference="ep").eval()
    gpu = PairwiseLaplaceGP(X.cuda(), C.cuda(), inference="ep").eval()
    torch.testing.assert_close(gpu.posterior(Xt.cuda()).mean.cpu(), cpu.posterior(Xt).mean)
    assert gpu.laplace_evidence().item() == pytest.approx(cpu.laplace_evidence().item(), abs=1e-8)


def test_ep_evidence_from_an_earlier_runs_sites_equals_a_fresh_one():
    # Inside a fit EP starts from the previous evaluation's sites, without a mode search: the
    # evidence and its gradient are those of a model that starts afresh at the new values.
    X, C = random_comparisons(15, 30, d=2, seed=9)
    warm = PairwiseLaplaceGP(X, C, inference="ep")
    warm.laplace_evidence()
    for model in (warm, fresh := PairwiseLaplaceGP(X, C, inference="ep")):
        model.covar_module.outputscale = 3.0
        model.covar_module.base_kernel.lengthscale = 0.2
    values = []
    for model in (warm, fresh):
        value = model.laplace_evidence()
        value.backward()
        values.append((value.item(), model.covar_module.raw_outputscale.grad.item()))
    assert values[0][0] == pytest.approx(values[1][0], abs=1e-8)
    assert values[0][1] == pytest.approx(values[1][1], rel=1e-4)
    # and the posterior after it is the fresh model's, to the full tolerance
    Xt = X[:5]
    torch.testing.assert_close(warm.eval().posterior(Xt).mean, fresh.eval().posterior(Xt).mean)
