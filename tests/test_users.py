"""Tests for botorch_pref.users: simulated answers and noise calibration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from botorch_pref.test_functions import get_utility
from botorch_pref.users import (
    SimulatedUser,
    calibrate_noise,
    error_probability,
    simulate_comparisons,
    top_utilities,
)


class Linear:
    """f(x) = c^T x on the unit cube: utility gaps are known exactly."""

    def __init__(self, coef: list[float]) -> None:
        self.coef = torch.tensor(coef, dtype=torch.float64)
        self.dim = len(coef)

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        return X @ self.coef.to(X)


def _phi_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def _wrong_reference(delta: float, scale: float, noise: str) -> float:
    if noise == "probit":
        return _phi_cdf(-abs(delta) / (math.sqrt(2.0) * scale))
    return 1.0 / (1.0 + math.exp(abs(delta) / scale))


def _pairs_with_gaps(gaps: list[float], copies: int) -> torch.Tensor:
    """Queries (len(gaps) * copies) x 2 x 1 whose option 0 beats option 1 by gaps[k] under x."""
    rows = []
    for gap in gaps:
        rows.append(torch.tensor([[0.5 + gap / 2], [0.5 - gap / 2]], dtype=torch.float64))
    return torch.stack(rows).repeat_interleave(copies, dim=0)


def test_error_probability_formulas() -> None:
    delta = torch.tensor([-0.3, -0.01, 0.0, 0.02, 0.5], dtype=torch.float64)
    for noise in ("probit", "gumbel"):
        for scale in (0.05, 0.2, 1.0):
            got = error_probability(delta, scale, noise).tolist()
            ref = [_wrong_reference(d, scale, noise) for d in delta.tolist()]
            np.testing.assert_allclose(got, ref, rtol=1e-12)
        zero = error_probability(delta, 0.0, noise)
        assert zero.tolist() == [0.0, 0.0, 0.5, 0.0, 0.0]
    # logit is an alias of gumbel
    torch.testing.assert_close(
        error_probability(delta, 0.3, "logit"), error_probability(delta, 0.3, "gumbel")
    )


@pytest.mark.parametrize("noise", ["probit", "gumbel"])
@pytest.mark.parametrize("scale", [0.05, 0.2])
def test_pairwise_error_rates_match_analytic(noise: str, scale: float) -> None:
    gaps = [0.0, 0.02, 0.1, 0.3]
    copies = 20000
    X = _pairs_with_gaps(gaps, copies)
    user = SimulatedUser(Linear([1.0]), noise=noise, scale=scale, seed=11)
    wrong = (user.choose(X) == 1).double().reshape(len(gaps), copies).mean(-1)
    for k, gap in enumerate(gaps):
        p = _wrong_reference(gap, scale, noise) if gap > 0 else 0.5
        se = math.sqrt(p * (1 - p) / copies)
        assert abs(wrong[k].item() - p) < 4 * se + 1e-12, (gap, wrong[k].item(), p)


def test_gumbel_choice_among_three_is_softmax() -> None:
    u = [0.0, 0.1, 0.25]
    scale, copies = 0.1, 30000
    X = torch.tensor([[v] for v in u], dtype=torch.float64).expand(copies, 3, 1)
    user = SimulatedUser(Linear([1.0]), noise="gumbel", scale=scale, seed=3)
    freq = torch.bincount(user.choose(X), minlength=3).double() / copies
    w = np.exp(np.array(u) / scale)
    p = w / w.sum()
    se = np.sqrt(p * (1 - p) / copies)
    assert np.all(np.abs(freq.numpy() - p) < 4 * se)


def test_probit_choice_among_three_matches_quadrature() -> None:
    u = np.array([0.0, 0.1, 0.25])
    scale, copies = 0.1, 30000
    # P(i wins) = int phi(z) prod_{j != i} Phi((u_i - u_j)/s + z) dz, by the trapezoid rule.
    z = np.linspace(-9, 9, 20001)
    pdf = np.exp(-(z**2) / 2) / np.sqrt(2 * np.pi)
    cdf = np.vectorize(_phi_cdf)
    p = []
    for i in range(3):
        integrand = pdf.copy()
        for j in range(3):
            if j != i:
                integrand *= cdf((u[i] - u[j]) / scale + z)
        p.append(np.trapezoid(integrand, z))
    p = np.array(p)
    assert p.sum() == pytest.approx(1.0, abs=1e-8)
    X = torch.tensor(u, dtype=torch.float64).reshape(3, 1).expand(copies, 3, 1)
    user = SimulatedUser(Linear([1.0]), noise="probit", scale=scale, seed=4)
    freq = torch.bincount(user.choose(X), minlength=3).double().numpy() / copies
    se = np.sqrt(p * (1 - p) / copies)
    assert np.all(np.abs(freq - p) < 4 * se)


@pytest.mark.parametrize("noise", ["probit", "gumbel"])
def test_noiseless_user_is_always_right(noise: str) -> None:
    f = get_utility("hartmann6")
    X = torch.rand(500, 4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    user = SimulatedUser(f, noise=noise, scale=0.0, seed=0)
    truth = f(X)
    torch.testing.assert_close(user.choose(X), truth.argmax(-1))
    torch.testing.assert_close(user.rank(X), truth.argsort(-1, descending=True))


def test_rank_is_permutation_and_agrees_with_choose() -> None:
    f = get_utility("branin")
    X = torch.rand(7, 300, 5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for noise in ("probit", "gumbel"):
        a = SimulatedUser(f, noise=noise, scale=5.0, seed=9)
        b = SimulatedUser(f, noise=noise, scale=5.0, seed=9)
        ranks = a.rank(X)
        choices = b.choose(X)
        assert ranks.shape == (7, 300, 5) and ranks.dtype == torch.long
        assert choices.shape == (7, 300) and choices.dtype == torch.long
        torch.testing.assert_close(ranks.sort(-1).values, torch.arange(5).expand(7, 300, 5))
        torch.testing.assert_close(ranks[..., 0], choices)
        # With this much noise the answers are not simply the noiseless ones.
        assert (choices != f(X).argmax(-1)).any()
    # Exact ties (duplicated options, no noise) resolve to the lower index in both.
    Xt = torch.rand(1, 2, dtype=torch.float64).expand(3, 2).unsqueeze(0)
    user = SimulatedUser(f, scale=0.0)
    assert user.choose(Xt).item() == 0 and user.rank(Xt).tolist() == [[0, 1, 2]]


def test_seeds_and_generators_reproduce() -> None:
    f = get_utility("hartmann6")
    X = torch.rand(200, 2, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    s = calibrate_noise(f, n_candidates=10**4, seed=0)
    a = SimulatedUser(f, scale=s, seed=5).choose(X)
    b = SimulatedUser(f, scale=s, seed=5).choose(X)
    c = SimulatedUser(f, scale=s, seed=6).choose(X)
    d = SimulatedUser(f, scale=s, seed=torch.Generator().manual_seed(5)).choose(X)
    assert torch.equal(a, b) and torch.equal(a, d) and not torch.equal(a, c)
    user = SimulatedUser(f, scale=s, seed=5)
    assert not torch.equal(user.choose(X), user.choose(X))  # fresh noise on each call
    # Single query: a 0-dim answer; float32 designs work too.
    single = SimulatedUser(f, scale=s, seed=0).choose(X[0].float())
    assert single.shape == () and single.dtype == torch.long


def test_compare_and_simulate_comparisons_format() -> None:
    f = get_utility("branin")
    X = torch.rand(30, 2, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    user = SimulatedUser(f, scale=0.0)
    datapoints, comparisons = simulate_comparisons(X, user)
    assert datapoints.shape == (60, 2) and comparisons.shape == (30, 2)
    assert comparisons.dtype == torch.long
    torch.testing.assert_close(datapoints, X.reshape(-1, 2))
    # Row k compares the two options of query k; the noiseless winner has the higher utility.
    torch.testing.assert_close(comparisons.sort(-1).values, torch.arange(60).reshape(30, 2))
    u = f(datapoints)
    assert bool((u[comparisons[:, 0]] > u[comparisons[:, 1]]).all())
    # q = 3: winner against each other option, with an offset.
    X3 = torch.rand(4, 3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    rows = user.compare(X3, offset=100)
    win = f(X3).argmax(-1)
    assert rows.shape == (8, 2)
    for k in range(4):
        block = rows[2 * k : 2 * k + 2] - 100 - 3 * k
        assert block[:, 0].tolist() == [win[k].item()] * 2
        assert sorted(block[:, 1].tolist()) == sorted(set(range(3)) - {win[k].item()})
    # BoTorch's PairwiseGP takes the data as they are.
    from botorch.models import PairwiseGP

    model = PairwiseGP(datapoints, comparisons)
    assert model.comparisons.shape[0] == 30


def test_calibration_against_linear_reference() -> None:
    # f(x) = x on [0, 1]: the top 1% of many uniforms is ~ U(0.99, 1), so the pair gaps D have
    # density 2 (w - t) / w^2 on [0, w], w = 0.01. Solve E[P_wrong(D; s)] = e by quadrature.
    w = 0.01
    t = np.linspace(0, w, 20001)
    dens = 2 * (w - t) / w**2
    for noise in ("gumbel", "probit"):
        for target in (0.1, 0.3):

            def mean_error(s: float, noise: str = noise) -> float:
                if noise == "probit":
                    p = 0.5 * np.vectorize(math.erfc)(t / (2 * s))
                else:
                    p = 1 / (1 + np.exp(t / s))
                return float(np.trapezoid(dens * p, t))

            lo, hi = 1e-6, 1.0
            for _ in range(60):
                mid = math.sqrt(lo * hi)
                lo, hi = (mid, hi) if mean_error(mid) < target else (lo, mid)
            ref = math.sqrt(lo * hi)
            got = calibrate_noise(Linear([1.0]), error_rate=target, noise=noise, seed=1)
            assert got == pytest.approx(ref, rel=0.03), (noise, target, got, ref)


@pytest.mark.parametrize(("target", "noise"), [(0.1, "gumbel"), (0.3, "probit")])
def test_calibrated_user_hits_error_rate_on_fresh_pairs(target: float, noise: str) -> None:
    f = get_utility("hartmann6")
    n = 2 * 10**5
    scale = calibrate_noise(f, error_rate=target, noise=noise, n_candidates=n, seed=0)
    # Fresh designs, a fresh top 1%, fresh random pairs, answered by the simulated user.
    g = torch.Generator().manual_seed(123)
    X = torch.rand(n, 6, dtype=torch.float64, generator=g)
    top = X[f(X).topk(n // 100).indices]
    n_pairs = 40000
    i = torch.randint(top.shape[0], (n_pairs,), generator=g)
    j = (i + torch.randint(1, top.shape[0], (n_pairs,), generator=g)) % top.shape[0]
    pairs = torch.stack([top[i], top[j]], dim=1)
    user = SimulatedUser(f, noise=noise, scale=scale, seed=321)
    truth = f(pairs).argmax(-1)
    rate = (user.choose(pairs) != truth).double().mean().item()
    assert rate == pytest.approx(target, abs=0.015)


def test_calibration_matches_qeubo_reference_scales() -> None:
    # Gumbel scales at 20% error: the qEUBO experiment scripts (Hartmann-6 0.1619,
    # Ackley-6 0.1416, Alpine1-7 0.5726) and this project's Branin measurement (0.096).
    reference = {"hartmann6": 0.1619, "ackley6": 0.1416, "alpine1-7": 0.5726, "branin": 0.096}
    for name, ref in reference.items():
        scale = calibrate_noise(get_utility(name), error_rate=0.2, noise="gumbel", seed=0)
        assert scale == pytest.approx(ref, rel=0.05), (name, scale)


def test_calibration_is_monotone_and_reproducible() -> None:
    f = get_utility("branin")
    kw = {"n_candidates": 5 * 10**4, "seed": 2}
    scales = [calibrate_noise(f, error_rate=e, **kw) for e in (0.05, 0.1, 0.2, 0.3, 0.45)]
    assert all(a < b for a, b in itertools.pairwise(scales))
    assert calibrate_noise(f, error_rate=0.2, **kw) == scales[2]
    # The difference of two Gumbel(0, s) draws is logistic, sd pi s / sqrt(3) ~ 1.81 s, wider than
    # the probit difference's sqrt(2) s: probit needs a larger scale for the same error rate.
    assert calibrate_noise(f, error_rate=0.2, noise="probit", **kw) > scales[2]
    user = SimulatedUser.calibrated(
        f, error_rate=0.2, seed=0, calibration_seed=2, n_candidates=5 * 10**4
    )
    assert user.scale == scales[2] and user.noise == "gumbel"


def test_top_utilities() -> None:
    f = Linear([1.0, 1.0])
    top = top_utilities(f, n_candidates=10**5, top_fraction=0.01, seed=0, chunk_size=7777)
    ref_X = torch.rand(10**5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert top.shape == (1000,)
    # Chunking does not change the draws: same as one big batch with the same seed.
    torch.testing.assert_close(top, f(ref_X).topk(1000).values)


def test_bad_inputs_raise() -> None:
    f = get_utility("branin")
    with pytest.raises(ValueError, match="scale"):
        SimulatedUser(f, scale=-0.1)
    with pytest.raises(ValueError, match="scale"):
        SimulatedUser(f, scale=float("nan"))
    with pytest.raises(ValueError, match="Unknown noise"):
        SimulatedUser(f, noise="cauchy", scale=0.1)
    with pytest.raises(ValueError, match="seed"):
        SimulatedUser(f, scale=0.1, seed=1.5)
    user = SimulatedUser(f, scale=0.1, seed=0)
    with pytest.raises(ValueError, match="q >= 2"):
        user.choose(torch.rand(5, 1, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="q x d"):
        user.choose(torch.rand(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="dimension 2"):
        user.rank(torch.rand(4, 2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="shape"):
        SimulatedUser(lambda X: X.sum(), scale=0.1).choose(torch.rand(4, 2, 3))
    for rate in (0.0, 0.5, -0.1, 0.7):
        with pytest.raises(ValueError, match="error_rate"):
            calibrate_noise(f, error_rate=rate, n_candidates=1000)
    with pytest.raises(ValueError, match="Unknown noise"):
        calibrate_noise(f, noise="uniform", n_candidates=1000)
    with pytest.raises(ValueError, match="dim"):
        calibrate_noise(lambda X: X.sum(-1), n_candidates=1000)
    with pytest.raises(ValueError, match="tied"):
        calibrate_noise(lambda X: torch.zeros(X.shape[0]), dim=2, n_candidates=1000)
    with pytest.raises(ValueError, match="n_candidates"):
        calibrate_noise(f, n_candidates=1)
    with pytest.raises(ValueError, match="top_fraction"):
        calibrate_noise(f, top_fraction=0.0, n_candidates=1000)
    with pytest.raises(ValueError, match="n_pairs"):
        calibrate_noise(f, n_pairs=0, n_candidates=1000)
    with pytest.raises(ValueError, match="scale"):
        error_probability(torch.zeros(2), -1.0)


def test_error_probability_needs_a_floating_delta() -> None:
    # An integer tie must not be rounded from 1/2 to 0 by the result's dtype.
    with pytest.raises(TypeError, match="delta"):
        error_probability(torch.tensor([0, 1]), 0.0)
    with pytest.raises(TypeError, match="delta"):
        error_probability(0.5, 0.1)  # type: ignore[arg-type]
    assert error_probability(torch.tensor([0.0, 1.0]), 0.0).tolist() == [0.5, 0.0]


def test_calibration_rtol_is_checked_and_bisection_stops_at_float_precision() -> None:
    f = Linear([1.0])
    kw = {"n_candidates": 2000, "n_pairs": 200, "seed": 0}
    for rtol in (0.0, -1e-3, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="rtol"):
            calibrate_noise(f, rtol=rtol, **kw)
    # Below the spacing of doubles the bisection cannot shrink its bracket: it must still stop.
    fine = calibrate_noise(f, rtol=1e-30, **kw)
    assert fine == pytest.approx(calibrate_noise(f, **kw), rel=1e-9)


def test_non_finite_utilities_are_rejected() -> None:
    # One NaN design among thousands used to shift the calibrated scale silently.
    def nan_at_top(X: torch.Tensor) -> torch.Tensor:
        y = X[..., 0].clone()
        y[X[..., 0] > 0.999] = float("nan")
        return y

    def inf_at_top(X: torch.Tensor) -> torch.Tensor:
        y = X[..., 0].clone()
        y[X[..., 0] > 0.999] = float("inf")
        return y

    with pytest.raises(ValueError, match="NaN"):
        calibrate_noise(nan_at_top, dim=1, n_candidates=10**4, n_pairs=1000)
    with pytest.raises(ValueError, match="NaN"):
        top_utilities(nan_at_top, dim=1, n_candidates=10**4)
    with pytest.raises(ValueError, match="infinite"):
        calibrate_noise(inf_at_top, dim=1, n_candidates=10**4, n_pairs=1000)

    # -inf outside the kept top set is harmless (an infeasible design, say).
    def neg_inf_low(X: torch.Tensor) -> torch.Tensor:
        y = X[..., 0].clone()
        y[X[..., 0] < 0.5] = -float("inf")
        return y

    top = top_utilities(neg_inf_low, dim=1, n_candidates=10**4)
    assert bool(torch.isfinite(top).all()) and top.shape == (100,)


@pytest.mark.parametrize("offset", [1.7, -1, True, "2"])
def test_compare_rejects_an_offset_that_is_not_a_non_negative_integer(offset) -> None:
    # offset=1.7 used to be truncated to 1 silently, and a negative offset was accepted.
    user = SimulatedUser(Linear([1.0, 2.0]), scale=0.0)
    X = torch.tensor([[[0.0, 0.0], [1.0, 1.0]]], dtype=torch.float64)
    with pytest.raises(ValueError, match=f"offset must be a non-negative integer, got {offset!r}"):
        user.compare(X, offset=offset)


def test_compare_offset_shifts_every_index() -> None:
    user = SimulatedUser(Linear([1.0, 2.0]), scale=0.0)
    # noiseless: the option with the larger c^T x wins (query 0: option 1, query 1: option 0)
    X = torch.tensor([[[0.0, 0.0], [1.0, 1.0]], [[0.5, 0.5], [0.0, 0.1]]], dtype=torch.float64)
    assert user.compare(X).tolist() == [[1, 0], [2, 3]]
    assert user.compare(X, offset=5).tolist() == [[6, 5], [7, 8]]
    assert user.compare(X, offset=5.0).tolist() == [[6, 5], [7, 8]]


def test_scale_that_is_not_a_number_is_named() -> None:
    # scale=None used to surface float()'s own TypeError, which does not name `scale`.
    f = Linear([1.0])
    with pytest.raises(TypeError, match="scale must be a real number, got None"):
        SimulatedUser(f, scale=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="scale must be a real number, got 'abc'"):
        SimulatedUser(f, scale="abc")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="scale must be a real number, got None"):
        error_probability(torch.zeros(2, dtype=torch.float64), None)  # type: ignore[arg-type]
    assert SimulatedUser(f, scale=0.25).scale == 0.25


def test_answer_pair_says_no_preference_inside_the_band_with_common_random_numbers() -> None:
    f = get_utility("branin")
    X = torch.rand(400, 2, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    band = 0.3
    answers = SimulatedUser(f, "gumbel", 0.5, seed=4).answer_pair(X, band)
    perceived = SimulatedUser(f, "gumbel", 0.5, seed=4).perceived_utility(X)
    choices = SimulatedUser(f, "gumbel", 0.5, seed=4).choose(X)
    tied = (perceived[:, 0] - perceived[:, 1]).abs() < band
    assert 0 < int(tied.sum()) < 400
    assert torch.equal(answers == -1, tied)
    assert torch.equal(answers[~tied], choices[~tied])  # the same noise as choose
    assert torch.equal(SimulatedUser(f, "gumbel", 0.5, seed=4).answer_pair(X), choices)
    user = SimulatedUser(f, "gumbel", 0.5, seed=4)
    with pytest.raises(ValueError, match="to pairs"):
        user.answer_pair(torch.rand(3, 2, dtype=torch.float64), band)
    for bad, error in ((-0.1, ValueError), (math.inf, ValueError), (None, TypeError)):
        with pytest.raises(error, match="tie_band"):
            user.answer_pair(X[0], bad)
