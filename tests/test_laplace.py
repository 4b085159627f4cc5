"""The pair engine (damped Newton, factors, evidence) against independent references."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from botorch_pref.inference import PairEngine, merge_pairs, predictive_terms
from botorch_pref.likelihoods import PairwiseLogit, PairwiseProbit

from .helpers import random_comparisons


def rbf(X: torch.Tensor, lengthscale, outputscale) -> torch.Tensor:
    sq = ((X.unsqueeze(-2) - X.unsqueeze(-3)) ** 2).sum(-1)
    return outputscale * torch.exp(-0.5 * sq / lengthscale**2)


def setup(n=12, m=20, seed=0, lengthscale=0.4, outputscale=2.0, noise=0.5):
    X, C = random_comparisons(n, m, seed=seed, noise=noise)
    K = rbf(X, lengthscale, outputscale).unsqueeze(0)
    return X, C, K, merge_pairs(C.unsqueeze(0), n)


def engine(lik, structure):
    """The pair engine of merged comparisons (``n`` only matters for warm-start keys)."""
    return PairEngine(lik, structure, n=int(structure.pairs.max()) + 1)


def dense_A(structure, n):
    pairs = structure.pairs[0]
    A = torch.zeros(pairs.shape[0], n, dtype=torch.float64)
    A[torch.arange(len(pairs)), pairs[:, 0]] += 1
    A[torch.arange(len(pairs)), pairs[:, 1]] -= 1
    return A


def test_merge_pairs_matches_brute_force():
    C = torch.tensor([[0, 1], [1, 0], [2, 0], [0, 1], [3, 2], [0, 2]])
    s = merge_pairs(C.unsqueeze(0), 4)
    pairs = [tuple(p) for p in s.pairs[0].tolist()]
    assert pairs == sorted({(min(a, b), max(a, b)) for a, b in C.tolist()})
    for k, (win, lose) in enumerate(C.tolist()):
        i, j = pairs[s.comp_pair[0, k]]
        assert {i, j} == {win, lose}
        assert s.comp_sign[0, k] == (1.0 if win == i else -1.0)


def test_merge_pairs_pads_batches_with_null_pairs():
    C = torch.tensor([[[0, 1], [1, 0], [0, 1]], [[0, 1], [2, 1], [2, 3]]])
    s = merge_pairs(C, 4)
    assert s.num_pairs.tolist() == [1, 3]
    assert s.pairs[0, 1:].eq(0).all()  # padding rows (0, 0) have a zero row of A


@pytest.mark.parametrize("form", ["comparison", "design"])
@pytest.mark.parametrize("lik", [PairwiseProbit(), PairwiseLogit()], ids=["probit", "logit"])
def test_mode_is_stationary(form, lik):
    X, _C, K, s = setup()
    mode = engine(lik, s).find_mode(K, form=form)
    assert bool(mode.converged.all())
    _, G, w = engine(lik, s).terms(mode.d)
    A = dense_A(s, X.shape[0])
    grad = A.T @ G[0]
    # stationarity of Psi: K^-1 f = grad log p  <=>  f = K grad
    torch.testing.assert_close(mode.f[0], K[0] @ grad, atol=1e-9, rtol=0)
    assert abs(float(grad.sum())) < 1e-12  # 1^T g = 0
    W = A.T @ torch.diag(w[0]) @ A
    torch.testing.assert_close(
        W @ torch.ones(X.shape[0], dtype=W.dtype), torch.zeros(X.shape[0], dtype=W.dtype)
    )
    assert bool((w > 0).all())


def brute_force_mode(lik, C, K):
    """Maximise Psi(f) = sum log p - f^T K^-1 f / 2 directly with SciPy and an explicit K^-1."""
    Kinv = np.linalg.inv(K.numpy())
    win, lose = C[:, 0].numpy(), C[:, 1].numpy()

    def fun(f):
        ft = torch.tensor(f, requires_grad=True)
        val = lik.log_prob(ft[win] - ft[lose]).sum() - 0.5 * ft @ torch.tensor(Kinv) @ ft
        (g,) = torch.autograd.grad(val, ft)
        return -val.item(), -g.numpy()

    res = minimize(
        fun,
        np.zeros(K.shape[0]),
        jac=True,
        method="L-BFGS-B",
        options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 5000},
    )
    return torch.tensor(res.x)


@pytest.mark.parametrize("form", ["comparison", "design"])
def test_mode_matches_brute_force_optimiser(form):
    _X, C, K, s = setup(n=8, m=14, lengthscale=0.3, outputscale=3.0, noise=0.05)
    lik = PairwiseProbit()
    mode = engine(lik, s).find_mode(K, form=form)
    torch.testing.assert_close(mode.f[0], brute_force_mode(lik, C, K[0]), atol=2e-5, rtol=0)


def test_two_forms_agree_on_mode_evidence_and_predictions():
    X, _C, K, s = setup(n=15, m=25)
    lik = PairwiseProbit()
    Xt = torch.rand(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    Xall = torch.cat([X, Xt])
    Kall = rbf(Xall, 0.4, 2.0)
    out = {}
    for form in ("comparison", "design"):
        mode = engine(lik, s).find_mode(K, form=form)
        log_z, _ = engine(lik, s).evidence_with_gradients(K, mode)
        factors = engine(lik, s).laplace_factors(K, mode)
        mean, V = predictive_terms(factors, Kall[:15, 15:].unsqueeze(0))
        cov = Kall[15:, 15:] - V[0].T @ V[0]
        out[form] = (mode.f, log_z, mean, cov)
    for a, b in zip(out["comparison"], out["design"], strict=True):
        torch.testing.assert_close(a, b, atol=1e-8, rtol=1e-8)


def test_predictive_matches_dense_laplace_formula():
    X, _C, K, s = setup(n=10, m=12)
    lik = PairwiseProbit()
    mode = engine(lik, s).find_mode(K)
    _, G, w = engine(lik, s).terms(mode.d)
    A = dense_A(s, 10)
    W = A.T @ torch.diag(w[0]) @ A
    Xt = torch.rand(4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    Kall = rbf(torch.cat([X, Xt]), 0.4, 2.0)
    k = Kall[:10, 10:]
    # Rasmussen & Williams (3.21)-(3.24): mean k^T grad, cov K** - k^T (K + W^-1)^-1 k,
    # written with the precision form K** - k^T K^-1 k + k^T K^-1 (K^-1 + W)^-1 K^-1 k.
    Kinv = torch.linalg.inv(K[0])
    Sigma = torch.linalg.inv(Kinv + W)
    cov_ref = Kall[10:, 10:] - k.T @ Kinv @ k + k.T @ Kinv @ Sigma @ Kinv @ k
    factors = engine(lik, s).laplace_factors(K, mode)
    mean, V = predictive_terms(factors, k.unsqueeze(0))
    torch.testing.assert_close(mean[0], k.T @ (A.T @ G[0]))
    torch.testing.assert_close(Kall[10:, 10:] - V[0].T @ V[0], cov_ref, atol=1e-8, rtol=1e-6)


@pytest.mark.parametrize("form", ["comparison", "design"])
def test_evidence_gradient_matches_finite_differences(form):
    X, _C, _, s = setup(n=10, m=16)
    lik = PairwiseProbit()
    theta = torch.tensor([0.35, 1.7], dtype=torch.float64, requires_grad=True)

    def evidence(th):
        K = rbf(X, th[0], th[1]).unsqueeze(0)
        mode = engine(lik, s).find_mode(K.detach(), form=form, tol=1e-13)
        return engine(lik, s).evidence_with_gradients(K, mode)[0].sum()

    (grad,) = torch.autograd.grad(evidence(theta), theta)
    h = 1e-5
    fd = []
    for k in range(2):
        e = torch.zeros(2, dtype=torch.float64)
        e[k] = h
        fd.append((evidence(theta.detach() + e) - evidence(theta.detach() - e)) / (2 * h))
    torch.testing.assert_close(grad, torch.stack(fd).detach(), atol=1e-6, rtol=1e-5)


def test_evidence_matches_dense_formula():
    _X, C, K, s = setup(n=9, m=15)
    lik = PairwiseProbit()
    mode = engine(lik, s).find_mode(K)
    log_z, f = engine(lik, s).evidence_with_gradients(K, mode)
    _, _, w = engine(lik, s).terms(mode.d)
    A = dense_A(s, 9)
    W = A.T @ torch.diag(w[0]) @ A
    fh = mode.f[0]
    ref = (
        lik.log_prob(fh[C[:, 0]] - fh[C[:, 1]]).sum()
        - 0.5 * fh @ torch.linalg.solve(K[0], fh)
        - 0.5 * torch.logdet(torch.eye(9, dtype=W.dtype) + K[0] @ W)
    )
    torch.testing.assert_close(log_z[0], ref)
    torch.testing.assert_close(f, mode.f)


def test_warm_start_converges_faster_to_the_same_mode():
    _X, _C, K, s = setup(n=30, m=60)
    lik = PairwiseProbit()
    cold = engine(lik, s).find_mode(K)
    warm = engine(lik, s).find_mode(K * 1.05, beta0=cold.beta)
    ref = engine(lik, s).find_mode(K * 1.05)
    torch.testing.assert_close(warm.f, ref.f, atol=1e-8, rtol=0)
    assert warm.iterations < ref.iterations


def test_bad_warm_start_is_discarded():
    _X, _C, K, s = setup(n=20, m=30)
    lik = PairwiseProbit()
    ref = engine(lik, s).find_mode(K)
    bad = engine(lik, s).find_mode(K, beta0=torch.full_like(ref.beta, 1e3))
    torch.testing.assert_close(bad.f, ref.f, atol=1e-8, rtol=0)


@pytest.mark.parametrize("form", ["comparison", "design"])
def test_separable_answers_and_tiny_noise_give_finite_mode(form):
    # Noiseless answers on a chain with a huge outputscale: pure Newton overshoots, the damped
    # iteration must still converge to a finite mode with the right order.
    n = 12
    X = torch.linspace(0, 1, n, dtype=torch.float64).unsqueeze(-1)
    C = torch.stack([torch.arange(1, n), torch.arange(0, n - 1)], -1)  # i+1 beats i
    C = torch.cat([C, C, torch.tensor([[n - 1, 0]])])
    K = rbf(X, 0.5, 1e4).unsqueeze(0)
    s = merge_pairs(C.unsqueeze(0), n)
    mode = engine(PairwiseProbit(), s).find_mode(K, form=form)
    assert bool(mode.converged.all()) and bool(torch.isfinite(mode.f).all())
    assert bool((mode.f[0].diff() > 0).all())


def test_batched_members_match_separate_runs():
    lik = PairwiseProbit()
    members = [setup(n=10, m=m, seed=seed) for seed, m in [(0, 3), (1, 25), (2, 12)]]
    K = torch.cat([mem[2] for mem in members])
    width = max(mem[1].shape[0] for mem in members)
    # same m is required for a batch tensor: repeat answers to pad (repeats are merged anyway)
    C = torch.stack([mem[1][torch.arange(width) % mem[1].shape[0]] for mem in members])
    s = merge_pairs(C, 10)
    batched = engine(lik, s).find_mode(K, form="comparison")
    for b, (_X, _Cb, Kb, _) in enumerate(members):
        single_s = merge_pairs(C[b : b + 1], 10)
        single = engine(lik, single_s).find_mode(Kb, form="comparison")
        torch.testing.assert_close(batched.f[b], single.f[0], atol=1e-9, rtol=0)
