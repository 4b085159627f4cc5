"""Expectation propagation with "no preference" answers (the ordinal probit) against references.

The references are independent of the library's tie formulas: the tie and win probabilities are
written here with ``ndtr``, the exact moments come from importance sampling or quadrature, and
the evidence's gradient from finite differences of converged runs.
"""

from __future__ import annotations

import math

import pytest
import torch
from botorch.fit import fit_gpytorch_mll

from botorch_pref import PairwiseLaplaceGP
from botorch_pref.data import PreferenceData
from botorch_pref.inference.blocks import build_observations
from botorch_pref.inference.ep import comparison_rows
from botorch_pref.likelihoods import ObservationKind, PairwiseLogit, PairwiseProbit
from botorch_pref.models.data import PreferenceInputError
from botorch_pref.models.evidence import LaplaceEvidence

from .helpers import (
    assert_ep_closer,
    monte_carlo_evidence,
    random_comparisons,
)

DT = torch.float64
X5 = torch.linspace(0, 1, 5, dtype=DT).unsqueeze(-1)
WINS = torch.tensor([[0, 1], [1, 2], [2, 3], [0, 3], [4, 0], [3, 1], [0, 1], [2, 4]])
TIES = torch.tensor([[1, 4], [2, 3], [0, 2], [2, 3]])  # a repeated tie too


def _data(wins: torch.Tensor, ties: torch.Tensor) -> PreferenceData:
    data = PreferenceData.from_comparisons(wins)
    for i, j in ties.tolist():
        data.add_tie(i, j)
    return data


def _model(inference: str, noise: float, outputscale: float, theta: float = 0.4, **kwargs):
    likelihood = PairwiseProbit(noise_std=noise, tie_threshold=theta)
    model = PairwiseLaplaceGP(
        X5, _data(WINS, TIES), likelihood=likelihood, inference=inference, **kwargs
    )
    model.covar_module.outputscale = outputscale
    model.covar_module.base_kernel.lengthscale = 0.3
    return model


def _log_likelihood(f: torch.Tensor, model: PairwiseLaplaceGP) -> torch.Tensor:
    """log p(data | f) for draws ``f`` (``N x 5``), written out with ``ndtr``."""
    s, theta = model.likelihood.scale, model.likelihood.tie_threshold.item()
    d_win = f[:, WINS[:, 0]] - f[:, WINS[:, 1]]
    d_tie = f[:, TIES[:, 0]] - f[:, TIES[:, 1]]
    tie = torch.special.ndtr((theta - d_tie) / s) - torch.special.ndtr((-theta - d_tie) / s)
    return torch.special.log_ndtr((d_win - theta) / s).sum(-1) + tie.log().sum(-1)


@pytest.mark.parametrize(("noise", "outputscale"), [(1.0, 4.0), (0.2, 4.0)])
def test_ep_with_ties_is_closer_to_the_exact_posterior_than_laplace(noise, outputscale):
    assert_ep_closer(
        lambda inference: _model(inference, noise, outputscale),
        _log_likelihood,
        X5,
        ep_bounds=(0.005, 0.04),
        factors=(3, 2),
    )


def test_ep_with_ties_evidence_matches_monte_carlo():
    model = _model("ep", 1.0, 4.0)
    exact = monte_carlo_evidence(model, _log_likelihood, X5)
    laplace = _model("laplace", 1.0, 4.0).laplace_evidence().item()
    # the Monte Carlo estimate's standard error is 0.001
    assert model.laplace_evidence().item() == pytest.approx(exact, abs=0.004)
    assert abs(laplace - exact) > 0.008


@pytest.mark.parametrize(
    ("answer", "theta", "outputscale"),
    [
        ("tie", 0.4, 3.0),
        ("tie", 0.05, 30.0),
        ("tie", 3.0, 0.5),
        ("win", 0.7, 3.0),
        ("win", None, 3.0),
    ],
)
def test_ep_is_exact_for_one_answer(answer, theta, outputscale):
    # One site: EP matches the tilted distribution's mean and variance and its normaliser
    # exactly. The reference integrates p(answer | c) N(c; 0, v) on a grid (theta None: the
    # probit without ties).
    X = torch.tensor([[0.2], [0.7]], dtype=DT)
    data = _data(torch.empty(0, 2, dtype=torch.long), torch.tensor([[0, 1]]))
    if answer == "win":
        data = _data(torch.tensor([[0, 1]]), torch.empty(0, 2, dtype=torch.long))
    likelihood = PairwiseProbit(tie_threshold=theta)
    model = PairwiseLaplaceGP(X, data, likelihood=likelihood, inference="ep")
    model.covar_module.outputscale = outputscale
    model.eval()
    post = model.posterior(X)
    mean, cov = post.mean.squeeze(-1), post.distribution.covariance_matrix
    c_mean = (mean[0] - mean[1]).item()
    c_var = (cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]).item()
    K = model.covar_module(X).to_dense().detach()
    v, s = (K[0, 0] + K[1, 1] - 2 * K[0, 1]).item(), model.likelihood.scale
    c = torch.linspace(-14 * math.sqrt(v), 14 * math.sqrt(v), 400_001, dtype=DT)
    if answer == "tie":
        p = torch.special.ndtr((theta - c) / s) - torch.special.ndtr((-theta - c) / s)
    else:
        p = torch.special.ndtr((c - (theta or 0.0)) / s)
    density = p * torch.exp(-0.5 * c * c / v)
    z = torch.trapezoid(density, c)
    exact_mean = (torch.trapezoid(c * density, c) / z).item()
    exact_var = (torch.trapezoid(c * c * density, c) / z).item() - exact_mean**2
    assert c_mean == pytest.approx(exact_mean, rel=1e-6, abs=1e-9)
    assert c_var == pytest.approx(exact_var, rel=1e-6)
    log_z = math.log(z.item() / math.sqrt(2 * math.pi * v))
    assert model.laplace_evidence().item() == pytest.approx(log_z, abs=1e-6)


def test_ep_with_ties_evidence_gradient_matches_finite_differences():
    def evidence(raw: tuple[float, float, float], grad: bool = False):
        model = _model("ep", 0.5, 2.0, tol=1e-12)
        kernel, likelihood = model.covar_module, model.likelihood
        with torch.no_grad():
            kernel.raw_outputscale.fill_(raw[0])
            kernel.base_kernel.raw_lengthscale.fill_(raw[1])
            likelihood.raw_tie_threshold.fill_(raw[2])
        value = model.laplace_evidence()
        if not grad:
            return value.item()
        value.backward()
        params = (kernel.raw_outputscale, kernel.base_kernel.raw_lengthscale)
        return [p.grad.item() for p in params] + [likelihood.raw_tie_threshold.grad.item()]

    point, h = (0.7, -0.9, -0.5), 1e-5
    for k, g in enumerate(evidence(point, grad=True)):
        up = tuple(x + h * (i == k) for i, x in enumerate(point))
        down = tuple(x - h * (i == k) for i, x in enumerate(point))
        assert g == pytest.approx((evidence(up) - evidence(down)) / (2 * h), rel=1e-5)


def test_ep_with_ties_fit_raises_the_evidence_and_fits_the_threshold():
    X, C = random_comparisons(15, 30, d=2, seed=5)
    data = _data(C, torch.tensor([[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11]]))
    model = PairwiseLaplaceGP(X, data, likelihood=PairwiseProbit(tie_threshold=0.1), inference="ep")
    mll = LaplaceEvidence(model.likelihood, model)
    before = mll().item()
    fit_gpytorch_mll(mll)
    assert mll().item() > before + 0.1
    assert model.likelihood.tie_threshold.item() != pytest.approx(0.1, rel=0.05)
    assert torch.isfinite(model.posterior(X).mean).all()


def test_ep_with_ties_in_float32_agrees_with_float64():
    X, C = random_comparisons(15, 30, d=2, seed=6)
    data = _data(C, torch.tensor([[0, 1], [2, 3], [4, 5], [4, 5]]))
    Xt = torch.rand(8, 2, generator=torch.Generator().manual_seed(0), dtype=DT)
    models = [
        PairwiseLaplaceGP(
            X.to(dtype), data, likelihood=PairwiseProbit(tie_threshold=0.5), inference="ep"
        ).eval()
        for dtype in (DT, torch.float32)
    ]
    p64, p32 = (m.posterior(Xt.to(m.datapoints.dtype)) for m in models)
    torch.testing.assert_close(p32.mean.double(), p64.mean, atol=3e-4, rtol=1e-3)
    torch.testing.assert_close(p32.variance.double(), p64.variance, atol=3e-4, rtol=1e-3)
    e64, e32 = (m.laplace_evidence().item() for m in models)
    assert e32 == pytest.approx(e64, abs=1e-3)


def test_ep_with_ties_batched_members_equal_separate_models():
    # Two members with their own designs and their own tie thresholds.
    gen = torch.Generator().manual_seed(3)
    Xb = torch.rand(2, 5, 2, generator=gen, dtype=DT)
    data = _data(WINS, TIES)
    batched = PairwiseLaplaceGP(
        Xb, data.expand(2), likelihood=PairwiseProbit(tie_threshold=0.4), inference="ep"
    )
    batched.likelihood.batch_tie_threshold(torch.Size([2]))
    batched.likelihood.tie_threshold = torch.tensor([0.3, 0.8], dtype=DT)
    evidence = batched.laplace_evidence()
    evidence.sum().backward()
    grad = batched.likelihood.raw_tie_threshold.grad
    Xt = torch.rand(2, 4, 2, generator=gen, dtype=DT)
    post = batched.eval().posterior(Xt)
    for r, theta in enumerate((0.3, 0.8)):
        single = PairwiseLaplaceGP(
            Xb[r], data, likelihood=PairwiseProbit(tie_threshold=theta), inference="ep"
        )
        value = single.laplace_evidence()
        value.backward()
        assert evidence[r].item() == pytest.approx(value.item(), abs=1e-7)
        assert grad[r].item() == pytest.approx(single.likelihood.raw_tie_threshold.grad.item())
        ref = single.eval().posterior(Xt[r])
        torch.testing.assert_close(post.mean[r], ref.mean, atol=1e-7, rtol=1e-6)


def test_ep_with_ties_refuses_the_logit_link():
    X, C = random_comparisons(6, 8, d=2, seed=7)
    data = _data(C, torch.tensor([[0, 1]]))
    with pytest.raises(PreferenceInputError, match="probit pair likelihood"):
        PairwiseLaplaceGP(X, data, likelihood=PairwiseLogit(tie_threshold=0.5), inference="ep")
    # the probit with ties is accepted, with and without tie answers
    for d in (data, C):
        model = PairwiseLaplaceGP(
            X, d, likelihood=PairwiseProbit(tie_threshold=0.5), inference="ep"
        ).eval()
        assert torch.isfinite(model.posterior(X).mean).all()


def test_comparison_rows_of_observations_take_pairs_and_ties_only():
    # Pairs and ties padded to three option columns: one row per answer, winner first.
    pair, tie, choice = (int(k) for k in (ObservationKind.PAIR, ObservationKind.TIE,
                                           ObservationKind.CHOICE))  # fmt: skip
    options = torch.tensor([[[3, 1, -1], [2, 0, -1], [-1, -1, -1]]])
    kind = torch.tensor([[pair, tie, pair]])
    rows = comparison_rows(build_observations(options, kind, torch.ones_like(kind)))
    assert rows.rows[0, :2].tolist() == [[3, 1], [2, 0]]
    assert rows.real.tolist() == [[True, True, False]]
    assert rows.tie.tolist() == [[False, True, False]]
    options = torch.tensor([[[0, 1, 2], [1, 2, -1]]])
    kind = torch.tensor([[choice, pair]])
    with pytest.raises(ValueError, match="not CHOICE"):
        comparison_rows(build_observations(options, kind, torch.ones_like(kind)))
