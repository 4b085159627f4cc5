"""The preference GP with graded comparisons and ratings: engines, exact references, fitting.

The references are independent of the library's ordinal formulas: the answers' probabilities
are written here with ``ndtr``, the mode and curvature come from dense autograd Newton steps
with an explicit ``K^-1``, and the exact posterior and evidence from importance sampling.
"""

from __future__ import annotations

import math

import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from scipy.stats import kendalltau

from botorch_pref import PairwiseLaplaceGP
from botorch_pref.data import PreferenceData, PreferenceDataError
from botorch_pref.inference import BlockEngine, PairEngine, build_observations, engine_for_data
from botorch_pref.inference.engine import predictive_terms
from botorch_pref.likelihoods import PairwiseProbit
from botorch_pref.models.evidence import LaplaceEvidence

from .helpers import assert_ep_closer

DT = torch.float64
X6 = torch.linspace(0, 1, 6, dtype=DT).unsqueeze(-1)
GRADED = [(0, 1, 4), (2, 1, 1), (3, 4, 2), (5, 0, 0), (1, 3, 3), (2, 4, 2), (0, 1, 3)]
RATINGS = [(0, 2), (3, 0), (5, 1), (2, 2)]


def _data(ties: bool = False) -> PreferenceData:
    data = PreferenceData(graded_levels=5, rating_levels=3)
    for a, b, level in GRADED:
        data.add_graded(a, b, level)
    for i, level in RATINGS:
        data.add_rating(i, level)
    if ties:
        data.add_tie(4, 5)
    return data


def _log_likelihood(f: torch.Tensor, lik: PairwiseProbit, ties: bool = False) -> torch.Tensor:
    """log p(data | f) for utilities ``f`` (``N x n``), written out with ``ndtr``."""
    s = lik.scale
    inf = torch.tensor([1e3], dtype=DT)  # beyond every utility: ndtr is 0 or 1 there
    t = torch.cat([-inf, lik.graded_thresholds.detach(), inf])
    c = torch.cat([-inf, lik.rating_cut_points.detach(), inf])
    a, b, lv = (torch.tensor(col) for col in zip(*GRADED, strict=True))
    d = f[:, a] - f[:, b]
    out = (torch.special.ndtr((t[lv + 1] - d) / s) - torch.special.ndtr((t[lv] - d) / s)).log()
    i, lv = (torch.tensor(col) for col in zip(*RATINGS, strict=True))
    r = s / math.sqrt(2)
    u = f[:, i]
    out2 = (torch.special.ndtr((c[lv + 1] - u) / r) - torch.special.ndtr((c[lv] - u) / r)).log()
    total = out.sum(-1) + out2.sum(-1)
    if ties:
        theta, dt = lik.tie_threshold.item(), f[:, 4] - f[:, 5]
        tie = torch.special.ndtr((theta - dt) / s) - torch.special.ndtr((-theta - dt) / s)
        total = total + tie.log()
    return total


def _kernel(outputscale: float = 2.0) -> torch.Tensor:
    sq = (X6 - X6.T) ** 2
    return outputscale * torch.exp(-0.5 * sq / 0.3**2) + 1e-10 * torch.eye(6, dtype=DT)


def _dense_reference(lik, K, ties=False):
    """Mode, Psi at the mode and the likelihood's curvature W by dense autograd Newton."""
    Kinv = torch.linalg.inv(K)

    def psi(f):
        return _log_likelihood(f.unsqueeze(0), lik, ties)[0] - 0.5 * f @ Kinv @ f

    f = torch.zeros(6, dtype=DT)
    for _ in range(50):
        grad = torch.autograd.functional.jacobian(psi, f)
        hess = torch.autograd.functional.hessian(psi, f)
        f = f - torch.linalg.solve(hess, grad)
    W = -torch.autograd.functional.hessian(psi, f) - Kinv
    return f, psi(f).detach(), W


def _engines(lik, ties):
    data = _data(ties).reshape(1)
    chosen = engine_for_data(lik, data, 6, DT)
    block = BlockEngine(
        lik, build_observations(data.options, data.kind, data.n_stages, data.level), 6
    )
    return chosen, block


@pytest.mark.parametrize("form", ["comparison", "design"])
@pytest.mark.parametrize("ties", [False, True])
def test_both_engines_match_the_dense_reference(form, ties):
    lik = PairwiseProbit(noise_std=0.5, tie_threshold=0.3 if ties else None)
    K = _kernel()
    chosen, block = _engines(lik, ties)
    assert isinstance(chosen, BlockEngine if ties else PairEngine)
    f_ref, psi_ref, W = _dense_reference(lik, K, ties)
    ref_logz = psi_ref - 0.5 * torch.logdet(torch.eye(6, dtype=DT) + K @ W)
    ref_cov = torch.linalg.inv(torch.linalg.inv(K) + W)
    for engine in (chosen, block):
        mode = engine.find_mode(K.unsqueeze(0), form=form)
        assert bool(mode.converged.all())
        torch.testing.assert_close(mode.f[0], f_ref, atol=1e-7, rtol=0)
        log_z, _ = engine.evidence_with_gradients(K.unsqueeze(0), mode)
        torch.testing.assert_close(log_z[0].detach(), ref_logz, atol=1e-7, rtol=0)
        mean, V = predictive_terms(engine.laplace_factors(K.unsqueeze(0), mode), K.unsqueeze(0))
        torch.testing.assert_close(mean[0], f_ref, atol=1e-7, rtol=0)
        torch.testing.assert_close(K - V[0].T @ V[0], ref_cov, atol=1e-7, rtol=1e-6)


def test_laplace_posterior_and_evidence_are_close_to_the_exact_ones():
    # importance sampling from the Laplace posterior (covariance doubled), 2e6 seeded draws
    lik = PairwiseProbit(noise_std=1.0)
    model = PairwiseLaplaceGP(X6, _data(), likelihood=lik)
    model.covar_module.outputscale = 2.0
    model.covar_module.base_kernel.lengthscale = 0.3
    model.eval()
    post = model.posterior(X6)
    mean, cov = post.mean.squeeze(-1).detach(), post.distribution.covariance_matrix.detach()
    K = model.covar_module(X6).to_dense().detach() + 1e-9 * torch.eye(6, dtype=DT)
    prior = torch.distributions.MultivariateNormal(torch.zeros(6, dtype=DT), K)
    proposal = torch.distributions.MultivariateNormal(mean, 2.0 * cov)
    torch.manual_seed(0)
    f = proposal.sample((2_000_000,))
    log_w = _log_likelihood(f, lik) + prior.log_prob(f) - proposal.log_prob(f)
    exact_evidence = (torch.logsumexp(log_w, 0) - math.log(f.shape[0])).item()
    w = torch.softmax(log_w, 0)
    exact_mean = (w.unsqueeze(-1) * f).sum(0)
    exact_cov = (w.unsqueeze(-1) * (f - exact_mean)).T @ (f - exact_mean)
    # ratings identify the offset: the raw (not centred) moments are compared; measured
    # 0.11 sd, 3.5% and 0.017 nats (the Laplace approximation's own error, not rounding)
    sd = exact_cov.diag().sqrt()
    assert ((mean - exact_mean) / sd).abs().max().item() < 0.15
    assert (cov - exact_cov).abs().max().item() < 0.05 * exact_cov.diag().max().item()
    assert abs(model.laplace_evidence().item() - exact_evidence) < 0.05


def test_evidence_gradient_in_the_thresholds_matches_finite_differences():
    model = PairwiseLaplaceGP(X6, _data(), likelihood=PairwiseProbit(noise_std=0.5))
    lik = model.likelihood
    params = [lik.raw_graded_increments, lik.rating_first_cut, lik.raw_rating_increments]
    grads = torch.autograd.grad(model.laplace_evidence().sum(), params)
    h = 1e-5
    for p, g in zip(params, grads, strict=True):
        for i in range(p.numel()):
            with torch.no_grad():
                p.view(-1)[i] += h
            up = model.laplace_evidence().item()
            with torch.no_grad():
                p.view(-1)[i] -= 2 * h
            down = model.laplace_evidence().item()
            with torch.no_grad():
                p.view(-1)[i] += h
            assert abs(g.reshape(-1)[i].item() - (up - down) / (2 * h)) < 1e-5


def test_the_model_takes_its_levels_from_the_data_and_refuses_others():
    model = PairwiseLaplaceGP(X6, _data())
    assert (model.likelihood.graded_levels, model.likelihood.rating_levels) == (5, 3)
    assert isinstance(model.engine, PairEngine)
    with pytest.raises(ValueError, match=r"graded comparisons have 5 levels.*7"):
        PairwiseLaplaceGP(X6, _data(), likelihood=PairwiseProbit(graded_levels=7))
    with pytest.raises(PreferenceDataError, match="no rating_levels"):
        bad = PreferenceData.from_checked(
            torch.tensor([[0, -1]]), torch.tensor([5]), torch.tensor([0]), torch.tensor([0])
        )
        PairwiseLaplaceGP(X6, bad)


def test_binary_data_predictions_are_unchanged_by_the_ordinal_machinery():
    # the same pairs as PreferenceData with a rating-free likelihood that has graded thresholds
    C = torch.tensor([[0, 1], [2, 1], [3, 4], [5, 0], [1, 3]])
    plain = PairwiseLaplaceGP(X6, C)
    levelled = PairwiseLaplaceGP(X6, C, likelihood=PairwiseProbit(graded_levels=5))
    test_X = torch.rand(7, 1, dtype=DT, generator=torch.Generator().manual_seed(0))
    a, b = plain.posterior(test_X), levelled.posterior(test_X)
    assert torch.equal(a.mean, b.mean) and torch.equal(a.variance, b.variance)


def _answers(n_designs: int, n_pairs: int, seed: int, d: int, noise: float):
    g = torch.Generator().manual_seed(seed)

    def utility(X):
        return -((X - 0.35) ** 2).sum(-1) * 6.0 + torch.sin(5 * X).sum(-1)

    X = torch.rand(n_designs, d, generator=g, dtype=DT)
    i = torch.randint(n_designs, (n_pairs,), generator=g)
    j = (i + torch.randint(1, n_designs, (n_pairs,), generator=g)) % n_designs
    delta = utility(X[i]) - utility(X[j]) + noise * torch.randn(n_pairs, generator=g, dtype=DT)
    X_test = torch.rand(200, d, generator=g, dtype=DT)
    return X, i, j, delta, X_test, utility(X_test)


def _kendall_taus(n_designs: int, n_pairs: int, seed: int, d: int, noise: float):
    """Kendall's tau of the fitted posterior mean against the utility at 200 test designs,
    from binary answers and from 5-level graded answers about the same pairs."""
    X, i, j, delta, X_test, u_test = _answers(n_designs, n_pairs, seed, d, noise)
    binary = torch.stack([torch.where(delta > 0, i, j), torch.where(delta > 0, j, i)], -1)
    cuts = delta.abs().quantile(torch.tensor([0.3, 0.7], dtype=DT))
    edges = torch.cat([-cuts.flip(0), cuts])
    graded = PreferenceData(graded_levels=5)
    for a, b, level in zip(
        i.tolist(), j.tolist(), torch.bucketize(delta, edges).tolist(), strict=True
    ):
        graded.add_graded(a, b, level)
    taus = []
    for data in (binary, graded):
        model = PairwiseLaplaceGP(X, data)
        fit_gpytorch_mll(LaplaceEvidence(model.likelihood, model))
        mean = model.posterior(X_test).mean.squeeze(-1).detach()
        taus.append(kendalltau(mean.numpy(), u_test.numpy()).statistic)
    assert bool((model.likelihood.graded_thresholds.diff() > 0).all())
    return taus


@pytest.mark.parametrize(
    ("d", "n_designs", "n_pairs", "noise"), [(1, 20, 30, 0.5), (2, 30, 40, 0.25)]
)
def test_graded_answers_recover_the_utility_better_than_binary_ones(d, n_designs, n_pairs, noise):
    # measured over seeds 0..7: tau 0.92 -> 0.96 (1-d) and 0.81 -> 0.91 (2-d), graded ahead on
    # all 8 seeds; the test takes the first four
    taus = torch.tensor([_kendall_taus(n_designs, n_pairs, seed, d, noise) for seed in range(4)])
    binary, graded = taus.mean(0).tolist()
    assert graded > binary + 0.02, taus
    assert int((taus[:, 1] > taus[:, 0]).sum()) >= 3, taus


# ------------------------------------------------------------------ expectation propagation
def _ep_model(inference: str, noise: float = 1.0, outputscale: float = 4.0):
    lik = PairwiseProbit(noise_std=noise)
    model = PairwiseLaplaceGP(X6, _data(), likelihood=lik, inference=inference)
    model.covar_module.outputscale = outputscale
    model.covar_module.base_kernel.lengthscale = 0.3
    return model


@pytest.mark.parametrize("noise", [1.0, 0.3])
def test_ep_is_closer_to_the_exact_posterior_than_laplace(noise):
    assert_ep_closer(
        lambda inference: _ep_model(inference, noise),
        lambda f, model: _log_likelihood(f, model.likelihood),
        X6,
        ep_bounds=(0.01, 0.04),
        factors=(2, 2),
    )


def test_ep_evidence_matches_monte_carlo_and_its_threshold_gradient_finite_differences():
    model = _ep_model("ep")
    K = model.covar_module(X6).to_dense().detach() + 1e-9 * torch.eye(6, dtype=DT)
    L = torch.linalg.cholesky(K)
    g = torch.Generator().manual_seed(1)
    log_p = torch.cat(
        [
            _log_likelihood(
                (L @ torch.randn(6, 1_000_000, generator=g, dtype=DT)).T, model.likelihood
            )
            for _ in range(4)
        ]
    )
    exact = (torch.logsumexp(log_p, 0) - math.log(log_p.numel())).item()
    assert abs(model.laplace_evidence().item() - exact) < 0.01
    p = model.likelihood.raw_graded_increments
    (grad,) = torch.autograd.grad(model.laplace_evidence().sum(), [p])
    h = 1e-5
    with torch.no_grad():
        p[0] += h
    up = model.laplace_evidence().item()
    with torch.no_grad():
        p[0] -= 2 * h
    down = model.laplace_evidence().item()
    assert abs(grad[0].item() - (up - down) / (2 * h)) < 1e-3 * max(1.0, abs(grad[0].item()))
