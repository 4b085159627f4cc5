"""Pairwise likelihoods: values, derivatives and predictive probabilities."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from botorch_pref.likelihoods import PairwiseLogit, PairwiseProbit, probit_hazard

LIKELIHOODS = [PairwiseProbit(), PairwiseProbit(noise_std=0.3), PairwiseLogit(), PairwiseLogit(2.0)]


@pytest.mark.parametrize("lik", LIKELIHOODS, ids=lambda x: f"{type(x).__name__}-{x.scale:.2f}")
def test_derivatives_match_autograd(lik):
    delta = torch.linspace(-8.0, 8.0, 41, dtype=torch.float64, requires_grad=True)
    log_p, grad, neg_hess = lik.derivatives(delta.detach())
    ref = lik.log_prob(delta)
    (g,) = torch.autograd.grad(ref.sum(), delta, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), delta)
    torch.testing.assert_close(log_p, ref.detach())
    torch.testing.assert_close(grad, g.detach())
    torch.testing.assert_close(neg_hess, -h)
    assert bool((neg_hess > 0).all())


def test_probit_matches_botorch_convention():
    delta = torch.tensor([-1.0, 0.0, 0.7], dtype=torch.float64)
    expected = torch.distributions.Normal(0.0, 1.0).cdf(delta / math.sqrt(2)).log()
    torch.testing.assert_close(PairwiseProbit().log_prob(delta), expected)


def test_probit_hazard_far_tail_is_accurate_and_positive():
    # Reference in float64 by the direct formula where it is accurate, and by the series where
    # the direct formula cancels; float32 must agree with float64 to float32 accuracy.
    z = -torch.logspace(-2, 4, 200, dtype=torch.float64)
    lam64, zl64 = probit_hazard(z)
    lam32, zl32 = probit_hazard(z.float())
    assert bool((zl64 > 0).all()) and bool((zl32 > 0).all())
    torch.testing.assert_close(lam32.double(), lam64, rtol=1e-5, atol=0)
    torch.testing.assert_close(zl32.double(), zl64, rtol=1e-4, atol=0)
    # Asymptotics: z + lambda(z) ~ -1/z for z -> -inf.
    far = z < -1e3
    torch.testing.assert_close(zl64[far] * (-z[far]), torch.ones_like(z[far]), rtol=1e-5, atol=0)


@settings(max_examples=60, deadline=None)
@given(st.floats(min_value=-60.0, max_value=-0.5))
def test_probit_curvature_continuous_across_series_switch(z0):
    # The curvature lambda (z + lambda) is smooth: values on either side of any point agree.
    z = torch.tensor([z0 - 1e-6, z0 + 1e-6], dtype=torch.float64)
    lam, zl = probit_hazard(z)
    curv = lam * zl
    assert abs(float(curv[0] - curv[1])) <= 1e-4 * float(curv.abs().max())


@pytest.mark.parametrize("lik", LIKELIHOODS, ids=lambda x: f"{type(x).__name__}-{x.scale:.2f}")
def test_predictive_probability_matches_monte_carlo(lik):
    gen = torch.Generator().manual_seed(0)
    mean = torch.tensor([-1.0, 0.0, 0.5, 2.0], dtype=torch.float64)
    var = torch.tensor([0.5, 2.0, 0.0, 4.0], dtype=torch.float64)
    draws = mean + var.sqrt() * torch.randn(400_000, 4, generator=gen, dtype=torch.float64)
    mc = lik.log_prob(draws).exp().mean(0)
    torch.testing.assert_close(lik.predictive_probability(mean, var), mc, atol=3e-3, rtol=0)


def _logit_expectation(m: float, sd: float, scale: float) -> float:
    """E[sigmoid(X / s)], X ~ N(m, sd^2), by adaptive quadrature over the logistic variable L
    of scale s: E_L[Phi((m - L) / sd)]."""
    integrate = pytest.importorskip("scipy.integrate")

    def integrand(u: float) -> float:  # u = L / s, standard logistic density
        return 0.125 * math.erfc((u * scale - m) / (sd * math.sqrt(2))) / math.cosh(0.5 * u) ** 2

    return integrate.quad(integrand, -60, 60, limit=200)[0]


@pytest.mark.parametrize("scale", [1.0, 0.3])
def test_logit_predictive_probability_is_exact_for_wide_and_narrow_beliefs(scale):
    """From sd << s (the sigmoid smooth on the Gaussian's scale) to sd >> s (a step)."""
    lik = PairwiseLogit(scale)
    for sd in (0.0, 0.1, 1.0, 2.9, 10.0, 30.0, 1000.0):
        means = torch.linspace(-3 * sd - 2, 3 * sd + 2, 13, dtype=torch.float64)
        got = lik.predictive_probability(means, torch.full_like(means, sd * sd))
        for m, p in zip(means.tolist(), got.tolist(), strict=True):
            want = 1 / (1 + math.exp(-m / scale)) if sd == 0 else _logit_expectation(m, sd, scale)
            assert p == pytest.approx(want, abs=1e-10), (sd, m)


def test_bad_scales_raise():
    with pytest.raises(ValueError, match="noise_std"):
        PairwiseProbit(noise_std=0.0)
    with pytest.raises(ValueError, match="scale"):
        PairwiseLogit(scale=float("nan"))


@pytest.mark.parametrize("bad", [0.0, -0.5, float("nan"), float("inf")])
def test_noise_std_is_checked_when_set_later(bad):
    # noise_std used to be a plain attribute: a later negative or NaN value was taken as is.
    lik = PairwiseProbit(noise_std=0.3)
    with pytest.raises(ValueError, match="noise_std must be a positive finite number"):
        lik.noise_std = bad
    assert lik.noise_std == 0.3 and lik.scale == pytest.approx(math.sqrt(2.0) * 0.3)


def test_noise_std_set_later_changes_the_link():
    lik = PairwiseProbit()
    lik.noise_std = 0.5
    assert isinstance(lik.noise_std, float) and lik.noise_std == 0.5
    delta = torch.tensor([-1.0, 0.2, 2.0], dtype=torch.float64)
    want = torch.tensor(
        [
            math.log(0.5 * math.erfc(-d / (math.sqrt(2.0) * 0.5 * math.sqrt(2.0))))
            for d in delta.tolist()
        ],
        dtype=torch.float64,
    )
    torch.testing.assert_close(lik.log_prob(delta), want)
    # a copy keeps the value (the models deep-copy their likelihoods)
    from copy import deepcopy

    assert deepcopy(lik).noise_std == 0.5


def test_a_probit_pickled_with_a_plain_noise_std_attribute_still_loads():
    import pickle

    lik = PairwiseProbit(noise_std=0.3)
    lik.__dict__["noise_std"] = lik.__dict__.pop("_noise_std")  # how older objects held it
    loaded = pickle.loads(pickle.dumps(lik))
    assert loaded.noise_std == 0.3 and loaded.scale == pytest.approx(math.sqrt(2.0) * 0.3)


@pytest.mark.parametrize("ties", [False, True])
def test_derivatives_at_another_scale_are_the_link_at_that_scale(ties):
    # A tensor scale evaluates each element at its own scale: the same as a likelihood built
    # with that scale (probit: s = sqrt(2) noise_std), for wins and, with a threshold, ties.
    delta = torch.tensor([-400.0, -30.0, -2.0, -0.1, 0.0, 0.3, 5.0, 60.0], dtype=torch.float64)
    scales = torch.tensor([0.3, 1.0, 1.7, 4.0, 0.5, 2.5, 9.0, 0.8], dtype=torch.float64)
    theta = 0.6 if ties else None
    builds = (
        (
            PairwiseProbit(tie_threshold=theta),
            lambda s: PairwiseProbit(s / math.sqrt(2), tie_threshold=theta),
        ),
        (PairwiseLogit(tie_threshold=theta), lambda s: PairwiseLogit(s, tie_threshold=theta)),
    )
    for lik, at_scale in builds:
        methods = ["derivatives"] + ["tie_derivatives"] * ties
        for method in methods:
            got = getattr(lik, method)(delta, scales)
            for k, s in enumerate(scales.tolist()):
                want = getattr(at_scale(s), method)(delta[k : k + 1])
                for g, w in zip(got, want, strict=True):
                    torch.testing.assert_close(g[k : k + 1], w, rtol=1e-12, atol=0.0)
