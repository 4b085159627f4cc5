"""Batched PairwiseLaplaceGP over data sets of different sizes (padding rows (-1, -1))."""

from __future__ import annotations

import warnings

import pytest
import torch
from botorch.fit import fit_gpytorch_mll

from botorch_pref import LaplaceEvidence, PairwiseLaplaceGP
from botorch_pref.models.pairwise import PreferenceDataError, default_covar_module

from .helpers import assert_hyperparameters_close

DT = torch.float64


def _data(n: int, m: int, seed: int, d: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=DT)
    util = torch.sin(6 * X[:, 0]) + X[:, 1] ** 2
    idx = torch.stack([torch.randperm(n, generator=g)[:2] for _ in range(m)])
    noisy = util[idx] + 0.3 * torch.randn(m, 2, generator=g, dtype=DT)
    swap = noisy[:, 0] < noisy[:, 1]
    C = torch.where(swap.unsqueeze(-1), idx.flip(-1), idx)
    return X, C


def _pad(datasets: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack data sets: extra designs repeat the member's first design, extra rows are (-1, -1)."""
    n = max(X.shape[0] for X, _ in datasets)
    m = max(C.shape[0] for _, C in datasets)
    Xs, Cs = [], []
    for X, C in datasets:
        Xs.append(torch.cat([X, X[:1].expand(n - X.shape[0], -1)]))
        Cs.append(torch.cat([C, torch.full((m - C.shape[0], 2), -1, dtype=torch.long)]))
    return torch.stack(Xs), torch.stack(Cs)


def _kernel(b: int | None, values: list[tuple[float, float]]):
    shape = torch.Size([b]) if b is not None else torch.Size()
    k = default_covar_module(2, batch_shape=shape)
    ls = torch.tensor([[v[0], v[0] * 1.5] for v in values], dtype=DT)
    os = torch.tensor([v[1] for v in values], dtype=DT)
    if b is None:
        ls, os = ls[0], os[0]
    k.base_kernel.lengthscale = ls.unsqueeze(-2)
    k.outputscale = os
    return k


HYPER = [(0.3, 4.0), (0.5, 20.0), (0.2, 1.0)]


@pytest.mark.parametrize("form", ["comparison", "design", None])
def test_padded_batch_equals_separate_models(form):
    # 2 comparisons next to 300 and a middle-sized member
    datasets = [_data(4, 2, 0), _data(120, 300, 1), _data(30, 40, 2)]
    X, C = _pad(datasets)
    with warnings.catch_warnings():  # every member's Newton iteration converges
        warnings.filterwarnings("error", message="Newton did not converge")
        batch = PairwiseLaplaceGP(X, C, covar_module=_kernel(3, HYPER), form=form)
        assert bool(torch.isfinite(batch.utility).all())  # the mode is found by now
    Xtest = torch.rand(7, 2, dtype=DT, generator=torch.Generator().manual_seed(9))
    post = batch.posterior(Xtest.expand(3, 7, 2))
    evidence = batch.laplace_evidence()
    for i, (Xi, Ci) in enumerate(datasets):
        single = PairwiseLaplaceGP(Xi, Ci, covar_module=_kernel(None, [HYPER[i]]), form=form)
        n = Xi.shape[0]
        torch.testing.assert_close(batch.utility[i, :n], single.utility, rtol=1e-7, atol=1e-7)
        p1 = single.posterior(Xtest)
        torch.testing.assert_close(post.mean[i], p1.mean, rtol=1e-7, atol=1e-7)
        torch.testing.assert_close(
            post.distribution.covariance_matrix[i],
            p1.distribution.covariance_matrix,
            rtol=1e-6,
            atol=1e-8,
        )
        torch.testing.assert_close(evidence[i], single.laplace_evidence(), rtol=1e-7, atol=1e-7)


def test_degenerate_member_does_not_disturb_others():
    # member 0: one pair answered the same way 50 times, between two copies of the same design
    # plus a third design; member 1: ordinary data
    X0 = torch.tensor([[0.2, 0.2], [0.2, 0.2], [0.7, 0.1]], dtype=DT)
    C0 = torch.tensor([[0, 2]] * 50 + [[1, 2]] * 10)
    X1, C1 = _data(40, 60, 3)
    X, C = _pad([(X0, C0), (X1, C1)])
    hyper = [(0.3, 4.0), (0.4, 8.0)]
    batch = PairwiseLaplaceGP(X, C, covar_module=_kernel(2, hyper))
    single = PairwiseLaplaceGP(X1, C1, covar_module=_kernel(None, hyper[1:]))
    assert bool(torch.isfinite(batch.utility).all())
    torch.testing.assert_close(batch.utility[1], single.utility, rtol=1e-7, atol=1e-7)
    torch.testing.assert_close(batch.laplace_evidence()[1], single.laplace_evidence())
    # the degenerate member ranks the repeated winners above the loser
    assert bool(batch.utility[0, 0] > batch.utility[0, 2])


def test_batched_fit_matches_separate_fits():
    datasets = [_data(10, 15, 4), _data(60, 120, 5)]
    X, C = _pad(datasets)
    start = [(0.5, 10.0), (0.5, 10.0)]
    batch = PairwiseLaplaceGP(X, C, covar_module=_kernel(2, start))
    fit_gpytorch_mll(LaplaceEvidence(batch.likelihood, batch))
    for i, (Xi, Ci) in enumerate(datasets):
        single = PairwiseLaplaceGP(Xi, Ci, covar_module=_kernel(None, start[:1]))
        fit_gpytorch_mll(LaplaceEvidence(single.likelihood, single))
        assert_hyperparameters_close(batch, i, single, atol=0.05)


def test_padding_rows_validated():
    X, C = _data(5, 3, 0)
    with pytest.raises(PreferenceDataError, match="only padding"):
        PairwiseLaplaceGP(X, torch.full((2, 2), -1))
    bad = torch.cat([C, torch.tensor([[-1, 2]])])
    with pytest.raises(PreferenceDataError, match=r"\(-1, -1\)"):
        PairwiseLaplaceGP(X, bad)
    # trailing padding in a single data set changes nothing
    padded = torch.cat([C, torch.full((4, 2), -1)])
    a = PairwiseLaplaceGP(X, C, covar_module=_kernel(None, HYPER[:1]))
    b = PairwiseLaplaceGP(X, padded, covar_module=_kernel(None, HYPER[:1]))
    torch.testing.assert_close(a.utility, b.utility)
    torch.testing.assert_close(a.laplace_evidence(), b.laplace_evidence())
