"""The exact-posterior sampler of ``benchmarks/posterior_check.py`` against closed forms."""

from __future__ import annotations

import math

import torch

from benchmarks.posterior_check import elliptical_slice, main

DT = torch.float64
K = torch.tensor([[1.0, 0.5, 0.2], [0.5, 1.0, 0.3], [0.2, 0.3, 1.0]], dtype=DT)


def _sample(log_likelihood, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    zero = torch.zeros(3, dtype=DT)
    chol = torch.linalg.cholesky(K)
    return elliptical_slice(log_likelihood, zero, chol, zero, 4000, burn=500, thin=5, generator=g)


def test_gaussian_likelihood_gives_the_conjugate_posterior():
    y, noise = torch.tensor([0.5, -1.0, 2.0], dtype=DT), 0.25
    S = _sample(lambda f: -0.5 * ((f - y) ** 2).sum() / noise)
    A = K + noise * torch.eye(3, dtype=DT)
    mean = K @ torch.linalg.solve(A, y)
    cov = K - K @ torch.linalg.solve(A, K)
    torch.testing.assert_close(S.mean(0), mean, rtol=0.0, atol=0.05)
    torch.testing.assert_close(S.var(0), cov.diagonal(), rtol=0.15, atol=0.0)


def test_one_probit_comparison_shifts_the_difference_as_in_closed_form():
    # f ~ N(0, K), one answer "0 beat 1" with P = Phi((f0 - f1) / s): the difference d = f0 - f1
    # (prior variance v) has posterior mean v / sqrt(v + s^2) * sqrt(2 / pi)
    s = 0.5
    S = _sample(lambda f: torch.special.log_ndtr((f[0] - f[1]) / s))
    v = float(K[0, 0] + K[1, 1] - 2 * K[0, 1])
    expected = v / math.sqrt(v + s * s) * math.sqrt(2 / math.pi)
    assert abs(float((S[:, 0] - S[:, 1]).mean()) - expected) < 0.05


def test_the_report_runs_on_the_products_loop(capsys):
    assert (
        main(["--problem", "branin", "--replications", "2", "--answers", "10", "--samples", "200"])
        == 0
    )
    out = capsys.readouterr().out
    assert "10 answers: mean correlation" in out
