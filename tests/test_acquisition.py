"""Tests for botorch_pref.acquisition: champion-challenger and the EUBO/qEUBO builders."""

from __future__ import annotations

import math

import pytest
import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.models import PairwiseGP
from botorch.models.model import Model
from botorch.optim import optimize_acqf
from botorch.posteriors.gpytorch import GPyTorchPosterior
from gpytorch.distributions import MultivariateNormal

from botorch_pref import PairwiseLaplaceGP
from botorch_pref.acquisition import (
    ChampionChallenger,
    champion,
    champion_index,
    make_eubo,
    make_qeubo,
)

DT = torch.float64


def _data(seed: int = 0, n: int = 14, d: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Designs and noiseless comparisons of consecutive pairs under a smooth utility."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=DT)
    f = -((X - 0.3) ** 2).sum(-1) + 0.3 * torch.sin(6 * X[:, 0])
    rows = []
    for i in range(0, n - 1):
        j = i + 1
        rows.append([i, j] if f[i] > f[j] else [j, i])
    return X, torch.tensor(rows)


@pytest.fixture(scope="module")
def model() -> PairwiseLaplaceGP:
    X, C = _data()
    m = PairwiseLaplaceGP(X, C)
    m.covar_module.outputscale = 3.0
    m.covar_module.base_kernel.lengthscale = 0.3
    m.eval()
    return m


class _FixedGaussian(Model):
    """A model whose posterior at two points (x, c) is a given bivariate normal, for any x.

    The challenger's first coordinate shifts the mean difference, so values far in the tail
    can be reached exactly.
    """

    _num_outputs = 1

    def __init__(self, var_x: float, var_c: float, cov: float) -> None:
        super().__init__()
        self.cov = torch.tensor([[var_x, cov], [cov, var_c]], dtype=DT)

    @property
    def num_outputs(self) -> int:
        return 1

    def posterior(self, X, output_indices=None, observation_noise=False, posterior_transform=None):
        mean = torch.stack([X[..., 0, 0], torch.zeros_like(X[..., 0, 0])], dim=-1)
        cov = self.cov.expand(*X.shape[:-2], 2, 2)
        return GPyTorchPosterior(MultivariateNormal(mean, cov))


def _mc_improvement(model: Model, X: torch.Tensor, c: torch.Tensor, n: int = 400_000):
    """Monte-Carlo E[(g(x) - g(c))^+] from the joint posterior, and its standard error."""
    pair = torch.cat([X, c.expand(X.shape[0], 1, -1)], dim=-2)
    post = model.posterior(pair)
    torch.manual_seed(1)
    with torch.no_grad():
        s = post.rsample(torch.Size([n])).squeeze(-1)
    imp = (s[..., 0] - s[..., 1]).clamp_min(0.0)
    return imp.mean(0), imp.std(0) / math.sqrt(n)


def test_value_matches_monte_carlo(model):
    c = champion(model)
    X = torch.rand(6, 1, 2, generator=torch.Generator().manual_seed(3), dtype=DT)
    with torch.no_grad():
        value = ChampionChallenger(model, c)(X)
    mc, se = _mc_improvement(model, X, c)
    assert value.shape == (6,)
    assert bool((value > 0).all())
    torch.testing.assert_close(value, mc, atol=float(5 * se.max()), rtol=0.0)


def test_marginal_variant_is_ei_over_champion_mean(model):
    c = champion(model)
    X = torch.rand(5, 1, 2, generator=torch.Generator().manual_seed(4), dtype=DT)
    with torch.no_grad():
        value = ChampionChallenger(model, c, variant="marginal")(X)
        mu_c = model.posterior(c).mean.reshape(())
        post = model.posterior(X)
        mu, sd = post.mean.reshape(-1), post.variance.reshape(-1).sqrt()
    normal = torch.distributions.Normal(0.0, 1.0)
    u = (mu - mu_c) / sd
    expected = (mu - mu_c) * normal.cdf(u) + sd * normal.log_prob(u).exp()
    torch.testing.assert_close(value, expected)
    joint = ChampionChallenger(model, c)(X)
    assert not torch.allclose(value, joint)  # the joint covariance matters


def test_identity_with_botorch_eubo(model):
    c = champion(model)
    X = torch.rand(7, 1, 2, generator=torch.Generator().manual_seed(5), dtype=DT)
    with torch.no_grad():
        cc = ChampionChallenger(model, c)(X)
        pairs = torch.cat([X, c.expand(7, 1, 2)], dim=-2)
        eubo = AnalyticExpectedUtilityOfBestOption(pref_model=model)(pairs)
        mu_c = model.posterior(c).mean.reshape(())
        eubo_winner = make_eubo(model, previous_winner=c)(X)
    torch.testing.assert_close(cc, eubo - mu_c)
    torch.testing.assert_close(cc, eubo_winner)


def test_identity_on_botorch_pairwisegp():
    X, C = _data(seed=2)
    m = PairwiseGP(X, C)
    m.eval()
    c = champion(m)
    Xt = torch.rand(4, 1, 2, generator=torch.Generator().manual_seed(6), dtype=DT)
    with torch.no_grad():
        cc = ChampionChallenger(m, c)(Xt)
        eubo = make_eubo(m)(torch.cat([Xt, c.expand(4, 1, 2)], dim=-2))
        mu_c = m.posterior(c).mean.reshape(())
    torch.testing.assert_close(cc, eubo - mu_c)


def test_log_value_and_far_tail():
    # Delta = x[0], t^2 = 1 + 2 - 2 * 0.5 = 2: u = Delta / sqrt 2.
    m = _FixedGaussian(1.0, 2.0, 0.5)
    t = math.sqrt(2.0)
    u = torch.tensor([-35.0, -25.0, -3.0, 0.0, 2.0], dtype=DT)
    X = (u * t).reshape(-1, 1, 1).requires_grad_(True)
    acqf = ChampionChallenger(m, torch.zeros(1, 1, dtype=DT))
    value = acqf(X)
    # reference: t * h(u), h(u) = phi(u) + u Phi(u); asymptotic series in the tail
    ref = []
    for ui in u.tolist():
        phi = math.exp(-0.5 * ui * ui) / math.sqrt(2 * math.pi)
        if ui < -20:
            s = 1 / ui**2
            h = phi * s * (1 - 3 * s + 15 * s**2 - 105 * s**3 + 945 * s**4)
        else:
            h = phi + ui * 0.5 * math.erfc(-ui / math.sqrt(2))
        ref.append(t * h)
    ref = torch.tensor(ref, dtype=DT)
    torch.testing.assert_close(value.detach(), ref, rtol=1e-9, atol=0.0)
    assert bool((value > 0).all())
    # the gradient is dE/dDelta = Phi(u) > 0 everywhere, also where the value is ~1e-270
    value.sum().backward()
    assert bool((X.grad > 0).all()) and bool(torch.isfinite(X.grad).all())
    log_value = ChampionChallenger(m, torch.zeros(1, 1, dtype=DT), log=True)(X.detach())
    torch.testing.assert_close(log_value, ref.log(), rtol=1e-9, atol=1e-9)


def test_value_at_champion_is_tiny(model):
    c = champion(model)
    with torch.no_grad():
        value = ChampionChallenger(model, c)(c.unsqueeze(0))
    assert 0.0 < float(value) < 1e-5  # t floored at 1e-6: t * phi(0)


def test_gradients_flow_and_optimize_acqf_improves(model):
    c = champion(model)
    acqf = ChampionChallenger(model, c, log=True)
    X = torch.rand(3, 1, 2, generator=torch.Generator().manual_seed(7), dtype=DT)
    X.requires_grad_(True)
    acqf(X).sum().backward()
    assert X.grad is not None and bool(torch.isfinite(X.grad).all())
    assert float(X.grad.abs().sum()) > 0
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=DT)
    torch.manual_seed(0)
    cand, val = optimize_acqf(acqf, bounds, q=1, num_restarts=3, raw_samples=64)
    grid = torch.rand(256, 1, 2, generator=torch.Generator().manual_seed(8), dtype=DT)
    with torch.no_grad():
        assert float(val) >= float(acqf(grid).max()) - 1e-6
    assert cand.shape == (1, 2) and bool(((cand >= 0) & (cand <= 1)).all())


def test_champion_is_highest_mean_compared_design(model):
    with torch.no_grad():
        mean = model.posterior(model.datapoints.unsqueeze(-2)).mean.reshape(-1)
    i = champion_index(model)
    assert i == int(mean.argmax())
    torch.testing.assert_close(champion(model), model.datapoints[i].unsqueeze(0))
    assert float(mean[i]) > float(mean.sort().values[-2])


def test_qeubo_matches_analytic_eubo_and_is_deterministic(model):
    X = torch.rand(5, 2, 2, generator=torch.Generator().manual_seed(9), dtype=DT)
    with torch.no_grad():
        analytic = make_eubo(model)(X)
        q1 = make_qeubo(model, num_samples=4096, seed=3)(X)
        q2 = make_qeubo(model, num_samples=4096, seed=3)(X)
    torch.testing.assert_close(q1, q2)
    torch.testing.assert_close(q1, analytic, atol=2e-2, rtol=0.0)


def test_bad_arguments(model):
    c = champion(model)
    with pytest.raises(ValueError, match="variant"):
        ChampionChallenger(model, c, variant="brochu")
    with pytest.raises(ValueError, match="single design"):
        ChampionChallenger(model, torch.zeros(2, 2, dtype=DT))
    with pytest.raises(ValueError, match="NaN"):
        ChampionChallenger(model, torch.tensor([float("nan"), 0.0], dtype=DT))
    with pytest.raises(ValueError, match="num_samples"):
        make_qeubo(model, num_samples=0)
    acqf = ChampionChallenger(model, c)
    with pytest.raises(ValueError, match="input dimensions"):
        acqf(torch.rand(2, 1, 3, dtype=DT))


def test_fused_laplace_eubo_equals_botorch_eubo():
    from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
    from botorch.models.transforms.input import Normalize

    from botorch_pref.acquisition import LaplaceEUBO
    from botorch_pref.models.pairwise import make_covar_module

    g = torch.Generator().manual_seed(3)
    X = torch.rand(30, 3, generator=g, dtype=DT)
    C = torch.stack([torch.arange(0, 30, 2), torch.arange(1, 30, 2)], -1)
    model = PairwiseLaplaceGP(X, C)
    fused = make_eubo(model)
    assert isinstance(fused, LaplaceEUBO)
    reference = AnalyticExpectedUtilityOfBestOption(pref_model=model)
    Z = torch.rand(7, 2, 3, generator=g, dtype=DT, requires_grad=True)
    v, (gv,) = fused(Z), torch.autograd.grad(fused(Z).sum(), Z)
    r, (gr,) = reference(Z), torch.autograd.grad(reference(Z).sum(), Z)
    # The Cholesky factor of a singular covariance amplifies round-off eps to sqrt(eps), and
    # whether a jitter is added depends on that round-off: member 3 agrees to sqrt(eps) only,
    # and its gradient (that of a Cholesky at a singular matrix) is not defined.
    regular = torch.arange(7) != 3
    torch.testing.assert_close(v[regular], r[regular])
    torch.testing.assert_close(v[3], r[3], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(gv[regular], gr[regular])
    # batched models (padded members too) and t-batches of pairs
    Xb = torch.stack([X, torch.cat([X[:20], X[:10]])])
    Cb = torch.stack([C, torch.cat([C[:8], torch.full((7, 2), -1)])])
    batch = PairwiseLaplaceGP(Xb, Cb, covar_module=make_covar_module(3, batch_shape=Xb.shape[:1]))
    Zb = torch.rand(5, 2, 2, 3, generator=g, dtype=DT)
    torch.testing.assert_close(
        make_eubo(batch)(Zb), AnalyticExpectedUtilityOfBestOption(pref_model=batch)(Zb)
    )
    # a batched model sharing one unbatched kernel among its members
    shared = PairwiseLaplaceGP(Xb, Cb, covar_module=make_covar_module(3))
    torch.testing.assert_close(
        make_eubo(shared)(Zb), AnalyticExpectedUtilityOfBestOption(pref_model=shared)(Zb)
    )
    # models it does not fit get BoTorch's class
    transformed = PairwiseLaplaceGP(X, C, input_transform=Normalize(3))
    assert not isinstance(make_eubo(transformed), LaplaceEUBO)
    assert not isinstance(make_eubo(model, previous_winner=X[0]), LaplaceEUBO)
    with pytest.raises(ValueError, match="ScaleKernel"):
        LaplaceEUBO(transformed)


def test_fused_eubo_sees_the_prior_mean_constant_as_the_posterior_does():
    from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption

    from botorch_pref.acquisition import LaplaceEUBO

    g = torch.Generator().manual_seed(4)
    X = torch.rand(12, 2, generator=g, dtype=DT)
    model = PairwiseLaplaceGP(X, torch.stack([torch.arange(0, 12, 2), torch.arange(1, 12, 2)], -1))
    model.mean_module.constant.data.fill_(5.0)
    Z = torch.rand(4, 2, 2, generator=g, dtype=DT)
    fused = make_eubo(model)
    assert isinstance(fused, LaplaceEUBO)
    torch.testing.assert_close(fused(Z), AnalyticExpectedUtilityOfBestOption(pref_model=model)(Z))


@pytest.mark.filterwarnings("ignore:A not p.d., added jitter")
@pytest.mark.parametrize("q", [2, 4])
def test_fused_laplace_qeubo_equals_botorch_qeubo(q):
    from botorch.acquisition.preference import qExpectedUtilityOfBestOption
    from botorch.models.transforms.input import Normalize
    from botorch.sampling.normal import SobolQMCNormalSampler

    from botorch_pref.acquisition import LaplaceQEUBO
    from botorch_pref.models.pairwise import make_covar_module

    def botorch_qeubo(model, seed):
        sampler = SobolQMCNormalSampler(sample_shape=torch.Size([64]), seed=seed)
        return qExpectedUtilityOfBestOption(pref_model=model, sampler=sampler)

    g = torch.Generator().manual_seed(5)
    X = torch.rand(30, 3, generator=g, dtype=DT)
    C = torch.stack([torch.arange(0, 30, 2), torch.arange(1, 30, 2)], -1)
    model = PairwiseLaplaceGP(X, C)
    fused = make_qeubo(model, num_samples=64, seed=11)
    assert isinstance(fused, LaplaceQEUBO)
    reference = botorch_qeubo(model, 11)
    # t-batches of option sets, one of them with two identical options (singular covariance)
    Z = torch.rand(7, q, 3, generator=g, dtype=DT)
    Z[3, 1] = Z[3, 0]
    Z.requires_grad_(True)
    v, (gv,) = fused(Z), torch.autograd.grad(fused(Z).sum(), Z)
    r, (gr,) = reference(Z), torch.autograd.grad(reference(Z).sum(), Z)
    # The covariance of member 3 is singular. Whether psd_safe_cholesky adds a jitter to its
    # diagonal (1e-8, then 1e-7, then 1e-6 in float64) depends on round-off, which differs
    # between the two code paths and between machines. A jitter j gives the repeated option a
    # factor entry of about sqrt(2 j), which moves each sample of it by sqrt(2 j) |z| and the
    # mean of the maximum by at most sqrt(2 j) E|z| < sqrt(2 j). So member 3 agrees only to
    # that bound, and its gradient (that of a Cholesky at a singular matrix) is not defined.
    regular = torch.arange(7) != 3
    torch.testing.assert_close(v[regular], r[regular])
    torch.testing.assert_close(v[3], r[3], rtol=0.0, atol=math.sqrt(2 * 1e-6))
    torch.testing.assert_close(gv[regular], gr[regular])
    # another seed gives other base samples
    assert not torch.allclose(make_qeubo(model, num_samples=64, seed=12)(Z), v)
    # batched models (padded members too)
    Xb = torch.stack([X, torch.cat([X[:20], X[:10]])])
    Cb = torch.stack([C, torch.cat([C[:8], torch.full((7, 2), -1)])])
    batch = PairwiseLaplaceGP(Xb, Cb, covar_module=make_covar_module(3, batch_shape=Xb.shape[:1]))
    Zb = torch.rand(5, 2, q, 3, generator=g, dtype=DT)
    torch.testing.assert_close(
        make_qeubo(batch, num_samples=64, seed=2)(Zb), botorch_qeubo(batch, 2)(Zb)
    )
    shared = PairwiseLaplaceGP(Xb, Cb, covar_module=make_covar_module(3))  # one kernel for all
    torch.testing.assert_close(
        make_qeubo(shared, num_samples=64, seed=2)(Zb), botorch_qeubo(shared, 2)(Zb)
    )
    # choices among four options under the multinomial-logit likelihood
    from botorch_pref.data import PreferenceData
    from botorch_pref.likelihoods import Choice

    data = PreferenceData()
    for i in range(0, 28, 4):
        data.add_choice([i, i + 1, i + 2, i + 3], chosen=i + (i // 4) % 4)
    choice = PairwiseLaplaceGP(X, data, likelihood=Choice())
    v, r = make_qeubo(choice, num_samples=64, seed=4)(Z), botorch_qeubo(choice, 4)(Z)
    torch.testing.assert_close(v[regular], r[regular])
    torch.testing.assert_close(v[3], r[3], rtol=1e-5, atol=1e-6)
    # models it does not fit get BoTorch's class; pending points are refused
    transformed = PairwiseLaplaceGP(X, C, input_transform=Normalize(3))
    assert not isinstance(make_qeubo(transformed), LaplaceQEUBO)
    with pytest.raises(ValueError, match="ScaleKernel"):
        LaplaceQEUBO(transformed)
    with pytest.raises(NotImplementedError, match="pending"):
        fused.set_X_pending(Z[:1].detach())


@pytest.mark.parametrize("variant", ["joint", "marginal"])
def test_fused_champion_challenger_equals_the_posterior_path(variant):
    # An identity posterior transform sends ChampionChallenger through model.posterior: the
    # fused moments must give the same values and gradients, batched champions included.
    from botorch.acquisition.objective import ScalarizedPosteriorTransform

    from botorch_pref.models.pairwise import make_covar_module

    identity = ScalarizedPosteriorTransform(weights=torch.ones(1, dtype=DT))
    g = torch.Generator().manual_seed(13)
    X = torch.rand(30, 3, generator=g, dtype=DT)
    C = torch.stack([torch.arange(0, 30, 2), torch.arange(1, 30, 2)], -1)
    Xb = torch.stack([X, torch.cat([X[:20], X[:10]])])
    Cb = torch.stack([C, torch.cat([C[:8], torch.full((7, 2), -1)])])
    single = PairwiseLaplaceGP(X, C)
    batch = PairwiseLaplaceGP(Xb, Cb, covar_module=make_covar_module(3, batch_shape=Xb.shape[:1]))
    for model, c, shape in ((single, X[3], (6, 1, 3)), (batch, Xb[:, 5], (6, 2, 1, 3))):
        for log in (False, True):
            Z = torch.rand(*shape, generator=g, dtype=DT, requires_grad=True)
            fused = ChampionChallenger(model, c, variant=variant, log=log)
            slow = ChampionChallenger(
                model, c, variant=variant, log=log, posterior_transform=identity
            )
            v, (gv,) = fused(Z), torch.autograd.grad(fused(Z).sum(), Z)
            r, (gr,) = slow(Z), torch.autograd.grad(slow(Z).sum(), Z)
            torch.testing.assert_close(v, r)
            torch.testing.assert_close(gv, gr)


def test_expected_improvement_matches_quadrature_and_its_log_the_tail():
    import mpmath

    from botorch_pref.acquisition import expected_improvement, log_expected_improvement

    delta = torch.tensor([-1.3, 0.0, 0.4, 2.5], dtype=DT)
    t = torch.tensor([0.7, 1.0, 2.0, 0.3], dtype=DT)
    for dl, tt, ei, log_ei in zip(
        delta.tolist(),
        t.tolist(),
        expected_improvement(delta, t).tolist(),
        log_expected_improvement(delta, t).tolist(),
        strict=True,
    ):
        # E[D^+] = int_0^inf x N(x; delta, t^2) dx
        ref = mpmath.quad(lambda x, dl=dl, tt=tt: x * mpmath.npdf(x, dl, tt), [0, mpmath.inf])
        assert ei == pytest.approx(float(ref), rel=1e-12, abs=1e-15)
        assert log_ei == pytest.approx(math.log(float(ref)), rel=1e-12)
    # far in the tail the closed form cancels; the log form keeps its relative accuracy
    u = torch.tensor([-40.0, -200.0], dtype=DT)
    log_tail = log_expected_improvement(u, torch.ones_like(u)).tolist()
    with mpmath.workdps(60):
        for uu, log_ei in zip(u.tolist(), log_tail, strict=True):
            h = mpmath.npdf(uu) + uu * mpmath.ncdf(uu)
            assert log_ei == pytest.approx(float(mpmath.log(h)), rel=1e-10)


def test_rbf_predictive_moments_equal_the_model_posterior():
    from botorch_pref.acquisition import rbf_predictive_moments, supports_rbf_moments
    from botorch_pref.models.pairwise import make_covar_module

    X, C = _data(seed=3, n=12, d=3)
    model = PairwiseLaplaceGP(X, C, covar_module=make_covar_module(3))
    assert supports_rbf_moments(model)
    Z = torch.rand(5, 3, 3, dtype=DT, generator=torch.Generator().manual_seed(1))
    moments = rbf_predictive_moments(model, Z)
    post = model.posterior(Z)
    cov = post.distribution.covariance_matrix
    torch.testing.assert_close(moments.mean, post.mean.squeeze(-1))
    torch.testing.assert_close(moments.covariance(), cov)
    torch.testing.assert_close(moments.variance(2), cov[..., 2, 2])
    torch.testing.assert_close(
        moments.difference_variance(), cov[..., 0, 0] + cov[..., 1, 1] - 2 * cov[..., 0, 1]
    )


@pytest.mark.parametrize("kernel", ["matern52", "matern32"])
def test_fused_moments_and_eubo_of_matern_kernels_equal_the_posterior_path(kernel):
    from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption

    from botorch_pref.acquisition import LaplaceEUBO, rbf_predictive_moments
    from botorch_pref.models.pairwise import make_covar_module

    X, C = _data(seed=4, n=12, d=3)
    model = PairwiseLaplaceGP(X, C, covar_module=make_covar_module(3, base_kernel=kernel))
    g = torch.Generator().manual_seed(2)
    Z = torch.rand(5, 3, 3, dtype=DT, generator=g)
    moments = rbf_predictive_moments(model, Z)
    post = model.posterior(Z)
    cov = post.distribution.covariance_matrix
    torch.testing.assert_close(moments.mean, post.mean.squeeze(-1))
    torch.testing.assert_close(moments.covariance(), cov)
    torch.testing.assert_close(
        moments.difference_variance(), cov[..., 0, 0] + cov[..., 1, 1] - 2 * cov[..., 0, 1]
    )
    fused = make_eubo(model)
    assert isinstance(fused, LaplaceEUBO)
    reference = AnalyticExpectedUtilityOfBestOption(pref_model=model)
    pairs = torch.rand(6, 2, 3, dtype=DT, generator=g, requires_grad=True)
    (gv,) = torch.autograd.grad(fused(pairs).sum(), pairs)
    (gr,) = torch.autograd.grad(reference(pairs).sum(), pairs)
    torch.testing.assert_close(fused(pairs), reference(pairs))
    torch.testing.assert_close(gv, gr)


def test_matern_correlation_is_flat_at_zero_and_rejects_other_smoothness():
    from botorch_pref.acquisition import correlation

    sq = torch.zeros(3, dtype=DT, requires_grad=True)
    assert correlation(sq, None).tolist() == [1.0, 1.0, 1.0]
    for nu in (1.5, 2.5):
        value = correlation(sq, nu)
        (grad,) = torch.autograd.grad(value.sum(), sq)
        assert value.tolist() == [1.0, 1.0, 1.0] and grad.abs().max() == 0
    with pytest.raises(ValueError, match="smoothness"):
        correlation(sq, 0.5)


@pytest.mark.parametrize("nu", [None, 1.5, 2.5])
def test_correlation_slope_is_the_derivative_of_correlation(nu):
    from botorch_pref.acquisition import correlation, correlation_slope

    sq = torch.tensor([1e-6, 0.01, 0.3, 1.0, 4.0, 25.0], dtype=DT, requires_grad=True)
    (grad,) = torch.autograd.grad(correlation(sq, nu).sum(), sq)
    torch.testing.assert_close(correlation_slope(sq.detach(), nu), grad, rtol=1e-6, atol=1e-9)
    at_zero = correlation_slope(torch.zeros(1, dtype=DT), nu)
    assert torch.isfinite(at_zero).all() and at_zero.item() < 0
    with pytest.raises(ValueError, match="smoothness"):
        correlation_slope(sq.detach(), 0.5)


@pytest.mark.parametrize("kernel", ["rbf", "matern52", "matern32"])
def test_fused_eubo_gradient_matches_finite_differences_and_botorch_on_batches(kernel):
    from botorch_pref.acquisition import LaplaceEUBO
    from botorch_pref.models.pairwise import make_covar_module

    g = torch.Generator().manual_seed(5)
    X = torch.rand(2, 16, 3, generator=g, dtype=DT)
    C = torch.stack([torch.arange(0, 16, 2), torch.arange(1, 16, 2)], -1).expand(2, 8, 2)
    covar = make_covar_module(3, batch_shape=torch.Size([2]), base_kernel=kernel)
    model = PairwiseLaplaceGP(X, C, covar_module=covar)
    with torch.no_grad():
        covar.base_kernel.lengthscale = torch.tensor([[[0.3, 0.5, 0.8]], [[0.6, 0.2, 0.4]]])
    fused = make_eubo(model)
    assert isinstance(fused, LaplaceEUBO)
    pairs = torch.rand(4, 2, 2, 3, generator=g, dtype=DT, requires_grad=True)
    assert torch.autograd.gradcheck(lambda p: fused(p), (pairs,))
    reference = AnalyticExpectedUtilityOfBestOption(pref_model=model)
    (gv,) = torch.autograd.grad(fused(pairs).sum(), pairs)
    (gr,) = torch.autograd.grad(reference(pairs).sum(), pairs)
    torch.testing.assert_close(gv, gr)
    # a pair of one design twice: the difference has no variance, the value is the mean
    twice = X[0, :1].expand(2, 3).unsqueeze(0).clone().requires_grad_(True)
    single = PairwiseLaplaceGP(X[0], C[0], covar_module=make_covar_module(3, base_kernel=kernel))
    value = make_eubo(single)(twice)
    (grad,) = torch.autograd.grad(value.sum(), twice)
    mean = single.posterior(twice[:, :1]).mean.reshape(1)
    torch.testing.assert_close(value, mean, rtol=0, atol=1e-6)  # up to the variance floor
    assert torch.isfinite(grad).all()


def test_fused_eubo_keeps_float32():
    X, C = _data(seed=6, n=12, d=2)
    model = PairwiseLaplaceGP(X.float(), C)
    pairs = torch.rand(3, 2, 2, requires_grad=True)
    value = make_eubo(model)(pairs)
    (grad,) = torch.autograd.grad(value.sum(), pairs)
    assert value.dtype == grad.dtype == torch.float32
    reference = AnalyticExpectedUtilityOfBestOption(pref_model=model)
    (grad_ref,) = torch.autograd.grad(reference(pairs).sum(), pairs)
    torch.testing.assert_close(value, reference(pairs))
    torch.testing.assert_close(grad, grad_ref)


@pytest.mark.parametrize("kernel", ["rbf", "matern32"])
def test_pair_moments_gradient_matches_finite_differences(kernel):
    from botorch_pref.acquisition import (
        moment_factors,
        pair_moments,
        pair_moments_vjp,
        rbf_predictive_moments,
    )
    from botorch_pref.models.pairwise import make_covar_module

    X, C = _data(seed=8, n=14, d=3)
    model = PairwiseLaplaceGP(X, C, covar_module=make_covar_module(3, base_kernel=kernel))
    factors = moment_factors(model)
    pairs = torch.rand(5, 2, 3, dtype=DT, generator=torch.Generator().manual_seed(4))
    mean, var = pair_moments(factors, pairs)
    traced = rbf_predictive_moments(model, pairs)
    torch.testing.assert_close(mean, traced.mean)
    torch.testing.assert_close(var, traced.difference_variance())
    # both outputs at once, with weights that mix them
    weights = torch.tensor([0.7, -1.3], dtype=DT)
    assert torch.autograd.gradcheck(
        lambda p: tuple(o * w for o, w in zip(pair_moments(factors, p), weights, strict=True)),
        (pairs.clone().requires_grad_(True),),
    )
    with pytest.raises(ValueError, match="pairs"):
        pair_moments(factors, torch.rand(5, 3, 3, dtype=DT))
    with pytest.raises(ValueError, match="with sq"):
        pair_moments_vjp(factors, traced._replace(sq=None), torch.ones(5, 2), torch.ones(5))
