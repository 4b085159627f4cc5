"""Graded comparisons and ratings: the interval likelihoods against references written here."""

from __future__ import annotations

import math

import pytest
import torch

from botorch_pref.likelihoods import PairwiseLogit, PairwiseProbit

DT = torch.float64


def _levels(x: torch.Tensor, level: int) -> torch.Tensor:
    return torch.full(x.shape, level, dtype=torch.long)


def _reference_probability(lik, x, cuts, level, scale):
    """P(level | x) = F((c_hi - x)/s) - F((c_lo - x)/s), with F written out here."""
    F = torch.special.ndtr if isinstance(lik, PairwiseProbit) else torch.sigmoid
    padded = torch.cat([torch.tensor([-math.inf]), cuts.detach(), torch.tensor([math.inf])])
    hi, lo = padded[level + 1], padded[level]
    return F((hi - x) / scale) - F((lo - x) / scale)


LIKELIHOODS = [
    lambda k: PairwiseProbit(graded_levels=k, rating_levels=k),
    lambda k: PairwiseProbit(noise_std=0.3, graded_levels=k, rating_levels=k),
    lambda k: PairwiseLogit(scale=0.7, graded_levels=k, rating_levels=k),
]


@pytest.mark.parametrize("make", LIKELIHOODS)
@pytest.mark.parametrize("k", [2, 3, 4, 5, 7])
def test_values_match_the_interval_probability_and_sum_to_one(make, k):
    lik = make(k)
    x = torch.linspace(-4, 4, 33, dtype=DT)
    for what, cuts, scale in (
        ("graded", lik.graded_thresholds, lik.scale),
        ("rating", lik.rating_cut_points, lik.scale / math.sqrt(2)),
    ):
        total = torch.zeros_like(x)
        for level in range(k):
            method = getattr(lik, f"{what}_derivatives")
            log_p = method(x, _levels(x, level))[0]
            ref = _reference_probability(lik, x, cuts, level, scale)
            torch.testing.assert_close(log_p.exp(), ref, rtol=1e-10, atol=1e-14)
            total += log_p.exp()
        torch.testing.assert_close(total, torch.ones_like(x))


@pytest.mark.parametrize("make", LIKELIHOODS)
@pytest.mark.parametrize("k", [2, 3, 5, 6])
def test_derivatives_match_finite_differences(make, k):
    lik = make(k)
    x = torch.linspace(-12, 12, 97, dtype=DT)
    h = 1e-5
    for method in (lik.graded_derivatives, lik.rating_derivatives):
        for level in range(k):
            lv = _levels(x, level)
            _, grad, neg_hess = method(x, lv)
            lp_plus, g_plus, _ = method(x + h, lv)
            lp_minus, g_minus, _ = method(x - h, lv)
            fd_grad = (lp_plus - lp_minus) / (2 * h)
            fd_hess = -(g_plus - g_minus) / (2 * h)
            torch.testing.assert_close(grad, fd_grad, rtol=1e-6, atol=1e-7)
            torch.testing.assert_close(neg_hess, fd_hess, rtol=1e-5, atol=1e-7)
            assert bool((neg_hess >= 0).all())  # log-concave in x


@pytest.mark.parametrize("make", LIKELIHOODS)
def test_threshold_gradients_match_finite_differences(make):
    lik = make(5)
    x = torch.linspace(-3, 3, 13, dtype=DT)
    lv = torch.arange(13) % 5
    params = [lik.raw_graded_increments, lik.rating_first_cut, lik.raw_rating_increments]
    with torch.no_grad():  # away from the starting values
        for p, value in zip(params, ([0.3, -0.2], -0.4, [0.1, 0.5, -0.3]), strict=True):
            p.copy_(torch.tensor(value, dtype=DT))

    def total() -> torch.Tensor:
        return lik.graded_derivatives(x, lv)[0].sum() + lik.rating_derivatives(x, lv)[0].sum()

    grads = torch.autograd.grad(total(), params)
    h = 1e-6
    for p, g in zip(params, grads, strict=True):
        for i in range(p.numel()):
            with torch.no_grad():
                flat = p.view(-1)
                flat[i] += h
                up = total()
                flat[i] -= 2 * h
                down = total()
                flat[i] += h
            assert abs(g.reshape(-1)[i].item() - (up - down).item() / (2 * h)) < 1e-6


def test_three_levels_are_the_tie_model_and_two_levels_the_pair():
    x = torch.linspace(-40, 40, 801, dtype=DT)
    for lik in (
        PairwiseProbit(tie_threshold=0.5, graded_levels=3),
        PairwiseLogit(tie_threshold=0.5, graded_levels=3),
    ):
        for got, want in zip(
            lik.graded_derivatives(x, _levels(x, 1)), lik.tie_derivatives(x), strict=True
        ):
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-300)
        top = lik.graded_derivatives(x, _levels(x, 2))
        for got, want in zip(top, lik.derivatives(x), strict=True):  # derivatives shift by 0.5
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-300)
    pair = PairwiseProbit(graded_levels=2)
    for got, want in zip(
        pair.graded_derivatives(x, _levels(x, 1)), pair.derivatives(x), strict=True
    ):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("k", [4, 5, 7])
def test_graded_levels_are_symmetric_under_swapping_the_designs(k):
    lik = PairwiseProbit(graded_levels=k)
    with torch.no_grad():
        lik.raw_graded_increments.copy_(torch.linspace(-1.0, 1.0, len(lik.raw_graded_increments)))
    x = torch.linspace(-5, 5, 41, dtype=DT)
    for level in range(k):
        a = lik.graded_derivatives(x, _levels(x, level))
        b = lik.graded_derivatives(-x, _levels(x, k - 1 - level))
        torch.testing.assert_close(a[0], b[0])
        torch.testing.assert_close(a[1], -b[1])
        torch.testing.assert_close(a[2], b[2])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_probit_middle_levels_are_finite_and_smooth_far_in_the_tail(dtype):
    # past the switch to the ratio form (|a| = 100 in float64, 10 in float32) the slope tends
    # to the pair's and the curvature to 1/s^2, without a jump at the switch
    lik = PairwiseProbit(graded_levels=5)
    s = lik.scale
    switch = (100.0 if dtype == torch.float64 else 10.0) * s + 1.0  # x where a = -100 (or -10)
    x = torch.tensor([switch - 1e-3, switch + 1e-3, 1e3, 1e6], dtype=dtype)
    log_p, grad, neg_hess = lik.graded_derivatives(x, _levels(x, 2))
    assert bool(torch.isfinite(log_p).all() & torch.isfinite(grad).all())
    torch.testing.assert_close(neg_hess[2:], torch.full_like(x[2:], 1 / s**2), rtol=1e-3, atol=0)
    torch.testing.assert_close(neg_hess[0], neg_hess[1], rtol=1e-3, atol=0)
    torch.testing.assert_close(grad[0], grad[1], rtol=1e-3, atol=0)


def test_thresholds_are_ordered_and_the_levels_checked():
    lik = PairwiseProbit(graded_levels=6, rating_levels=4)
    t, c = lik.graded_thresholds, lik.rating_cut_points
    assert len(t) == 5 and len(c) == 3
    assert bool((t.diff() > 0).all() & (c.diff() > 0).all())
    assert t[2].item() == 0.0  # even k: 0 in the middle
    lik.match_levels(6, None)  # the same numbers: nothing changes
    with pytest.raises(ValueError, match=r"graded comparisons have 5 levels.*graded_levels=5"):
        lik.match_levels(5, None)
    with pytest.raises(ValueError, match="ratings have 3 levels"):
        lik.match_levels(None, 3)
    with pytest.raises(ValueError, match="graded_levels must be"):
        PairwiseProbit(graded_levels=1)
    with pytest.raises(ValueError, match="rating_levels must be"):
        PairwiseProbit(rating_levels=2.5)
    with pytest.raises(ValueError, match="no graded levels"):
        PairwiseProbit().graded_thresholds
