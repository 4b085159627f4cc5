"""Comparison-graph diagnostics and relative utilities against brute force."""

from __future__ import annotations

import matplotlib
import pytest
import torch

from botorch_pref import PairwiseProbit, PreferenceData
from botorch_pref.diagnostics import comparison_graph, plot_comparison_graph, relative_posterior
from botorch_pref.models.pairwise import PairwiseLaplaceGP

from .helpers import random_comparisons

matplotlib.use("Agg")


def test_graph_counts_degrees_and_components():
    X = torch.rand(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    C = torch.tensor([[0, 1], [1, 0], [0, 1], [2, 1], [3, 4], [5, 4]])
    g = comparison_graph(PairwiseLaplaceGP(X, C))
    edges = [tuple(e) for e in g.edges.tolist()]
    assert edges == [(0, 1), (1, 2), (3, 4), (4, 5)]
    assert g.wins.tolist() == [[2, 1], [0, 1], [1, 0], [0, 1]]
    assert g.degrees.tolist() == [1, 2, 1, 1, 2, 1]
    assert g.num_components == 2
    assert g.components.tolist() == [0, 0, 0, 1, 1, 1]
    assert g.algebraic_connectivity == 0.0
    # the same answers recorded as PreferenceData give the same graph
    same = comparison_graph(PairwiseLaplaceGP(X, PreferenceData.from_comparisons(C)))
    assert same.edges.tolist() == g.edges.tolist() and same.wins.tolist() == g.wins.tolist()
    # a likelihood with a fitted tie threshold (a session's): numbers, not autograd tensors
    tied = PairwiseLaplaceGP(X, C, likelihood=PairwiseProbit(tie_threshold=0.5))
    assert not comparison_graph(tied).laplacian.requires_grad


def test_laplacian_is_the_hessian_of_the_negative_log_likelihood():
    X, C = random_comparisons(12, 30, seed=1)
    model = PairwiseLaplaceGP(X, C)
    g = comparison_graph(model)
    f_hat = model.utility.detach()

    def nll(f):
        return -model.likelihood.log_prob(f[C[:, 0]] - f[C[:, 1]]).sum()

    H = torch.autograd.functional.hessian(nll, f_hat)
    torch.testing.assert_close(g.laplacian, H)
    assert g.num_components == 1
    assert g.algebraic_connectivity == pytest.approx(float(torch.linalg.eigvalsh(H)[1]))


def test_relative_posterior_matches_joint_posterior_algebra():
    X, C = random_comparisons(15, 25, seed=2)
    model = PairwiseLaplaceGP(X, C)
    Xt = torch.rand(4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    R = torch.rand(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    rel = relative_posterior(model, Xt, R, chunk_size=3)  # two chunks
    post = model.posterior(torch.cat([Xt, R]))
    mu, S = post.mean.squeeze(-1).detach(), post.covariance_matrix.detach()
    for k in range(4):
        a = torch.zeros(7, dtype=torch.float64)
        a[k] = 1.0
        a[4:] = -1.0 / 3
        torch.testing.assert_close(rel.mean[k], a @ mu)
        torch.testing.assert_close(rel.variance[k], a @ S @ a)


def test_relative_band_shrinks_while_absolute_band_stays_wide():
    # With prior uncertainty about the overall level (a large constant in the kernel), more
    # answers cannot shrink the absolute band, but they do shrink the relative one.
    from gpytorch.kernels import AdditiveKernel, ConstantKernel, RBFKernel, ScaleKernel

    def kernel():
        k = AdditiveKernel(ScaleKernel(RBFKernel()), ConstantKernel()).double()
        k.kernels[1].constant = torch.tensor(10.0, dtype=torch.float64)
        return k

    Xt = torch.linspace(0, 1, 7, dtype=torch.float64).unsqueeze(-1)
    few = PairwiseLaplaceGP(*random_comparisons(10, 5, d=1, seed=5), covar_module=kernel())
    many = PairwiseLaplaceGP(*random_comparisons(40, 120, d=1, seed=5), covar_module=kernel())
    for m in (few, many):
        assert bool((m.posterior(Xt).variance.squeeze(-1) > 10.0).all())
    rel_few = relative_posterior(few, Xt, Xt).variance
    rel_many = relative_posterior(many, Xt, Xt).variance
    assert float(rel_many.mean()) < 0.5 * float(rel_few.mean())


def test_plot_and_bad_input(tmp_path):
    X, C = random_comparisons(8, 10, seed=0)
    model = PairwiseLaplaceGP(X, C)
    ax = plot_comparison_graph(comparison_graph(model), X)
    ax.figure.savefig(tmp_path / "graph.png")
    assert (tmp_path / "graph.png").stat().st_size > 0
    with pytest.raises(ValueError, match="t x d"):
        relative_posterior(model, X[0])
    with pytest.raises(ValueError, match="reference"):
        relative_posterior(model, X, X[:0])
    batched = PairwiseLaplaceGP(torch.stack([X, X]), C)
    with pytest.raises(ValueError, match=r"empty batch shape, got \(2,\)"):
        relative_posterior(batched, X)
    ties = PreferenceData.from_comparisons(C).add_tie(0, 1)
    tie_model = PairwiseLaplaceGP(X, ties, likelihood=PairwiseProbit(tie_threshold=0.5))
    with pytest.raises(ValueError, match="choices, rankings or ties"):
        comparison_graph(tie_model)


@pytest.mark.parametrize("chunk_size", [0, -3, 1.5, True])
def test_relative_posterior_rejects_a_bad_chunk_size(chunk_size):
    # chunk_size=0 used to reach torch's split() and fail with its "split_size" RuntimeError.
    X, C = random_comparisons(6, 8, seed=0)
    model = PairwiseLaplaceGP(X, C)
    with pytest.raises(
        ValueError, match=f"chunk_size must be a positive integer, got {chunk_size}"
    ):
        relative_posterior(model, X, chunk_size=chunk_size)


def test_relative_posterior_chunking_does_not_change_the_answer():
    X, C = random_comparisons(6, 8, seed=0)
    model = PairwiseLaplaceGP(X, C)
    whole = relative_posterior(model, X)
    for chunk_size in (1, 4.0):  # an integral float is an integer
        part = relative_posterior(model, X, chunk_size=chunk_size)
        torch.testing.assert_close(part.mean, whole.mean)
        torch.testing.assert_close(part.variance, whole.variance)
