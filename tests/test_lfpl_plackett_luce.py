"""Tests of the Plackett-Luce likelihood against brute force, choix and finite differences."""

from __future__ import annotations

import itertools
import math

import choix
import numpy as np
import pytest
import torch

from botorch_pref.lfpl.plackett_luce import gumbel_rankings, plackett_luce_nll


def brute_force_nll(scores: list[float], top_k: int | None = None) -> float:
    """Product formula with explicit loops, in float64 Python arithmetic."""
    stages = len(scores) - 1 if top_k is None else min(top_k, len(scores) - 1)
    total = 0.0
    for k in range(stages):
        denominator = sum(math.exp(s) for s in scores[k:])
        total -= math.log(math.exp(scores[k]) / denominator)
    return total


def test_matches_product_formula_for_short_rankings():
    gen = torch.Generator().manual_seed(0)
    for length in (2, 3, 4, 5):
        scores = torch.randn(7, length, generator=gen, dtype=torch.float64)
        got = plackett_luce_nll(scores, reduction="none")
        want = torch.tensor([brute_force_nll(row.tolist()) for row in scores], dtype=torch.float64)
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("top_k", [None, 1, 2])
def test_probabilities_of_all_orderings_sum_to_one(top_k):
    scores = torch.tensor([0.3, -1.2, 2.0, 0.7], dtype=torch.float64)
    k = len(scores) if top_k is None else top_k
    # Enumerate every ordered prefix of length k: their probabilities must sum to one.
    prefixes = list(itertools.permutations(range(len(scores)), k))
    orders = [list(p) + [i for i in range(len(scores)) if i not in p] for p in prefixes]
    nll = plackett_luce_nll(scores[torch.tensor(orders)], top_k=top_k, reduction="none")
    assert torch.exp(-nll).sum().item() == pytest.approx(1.0, abs=1e-12)
    for order, value in zip(orders, nll.tolist(), strict=True):
        assert value == pytest.approx(brute_force_nll(scores[order].tolist(), top_k))


def test_matches_choix_log_likelihood():
    rng = np.random.default_rng(1)
    n_items = 8
    params = rng.normal(size=n_items)
    data = [tuple(rng.permutation(n_items)[: rng.integers(2, n_items + 1)]) for _ in range(30)]
    width = max(len(r) for r in data)
    index = torch.zeros(len(data), width, dtype=torch.long)
    for n, ranking in enumerate(data):
        index[n, : len(ranking)] = torch.tensor(ranking)
    lengths = torch.tensor([len(r) for r in data])
    scores = torch.from_numpy(params)[index]
    ours = -plackett_luce_nll(scores, lengths).item()
    assert ours == pytest.approx(choix.utils.log_likelihood_rankings(data, params), rel=1e-10)


def test_maximum_likelihood_matches_choix_fit():
    rng = np.random.default_rng(2)
    n_items = 5
    truth = rng.normal(size=n_items)
    gen = torch.Generator().manual_seed(2)
    orders = gumbel_rankings(torch.from_numpy(truth).expand(200, -1).clone(), gen)
    data = [tuple(row) for row in orders.tolist()]
    # choix's unpenalised maximum-likelihood estimate, centred to mean zero.
    fitted = choix.ilsr_rankings(n_items, data, alpha=0.0, tol=1e-12)
    theta = torch.zeros(n_items, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS(
        [theta], max_iter=200, tolerance_grad=1e-12, line_search_fn="strong_wolfe"
    )

    def closure():
        optimizer.zero_grad()
        # The likelihood only sees differences: pin the mean to zero like choix does.
        loss = plackett_luce_nll(theta[orders]) + theta.sum().square()
        loss.backward()
        return loss

    optimizer.step(closure)
    np.testing.assert_allclose(theta.detach().numpy(), fitted, atol=1e-5)
    # The fit also recovers the truth roughly (a sanity check that the test has power).
    assert np.corrcoef(fitted, truth)[0, 1] > 0.9


def test_padding_is_ignored_and_gets_no_gradient():
    scores = torch.tensor(
        [[1.0, 0.5, float("nan"), 1e30], [0.2, -0.3, 4.0, 2.0], [3.0, 1.0, 1e30, -1e30]],
        dtype=torch.float64,
        requires_grad=True,
    )
    lengths = torch.tensor([2, 4, 2])
    nll = plackett_luce_nll(scores, lengths, reduction="none")
    want = [
        brute_force_nll([1.0, 0.5]),
        brute_force_nll([0.2, -0.3, 4.0, 2.0]),
        brute_force_nll([3.0, 1.0]),
    ]
    torch.testing.assert_close(nll, torch.tensor(want, dtype=torch.float64))
    nll.sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert (scores.grad[0, 2:] == 0).all() and (scores.grad[2, 2:] == 0).all()


def test_length_one_and_zero_rankings_contribute_nothing():
    scores = torch.tensor([[5.0, -1.0], [2.0, 3.0]])
    nll = plackett_luce_nll(scores, torch.tensor([1, 0]), reduction="none")
    assert nll.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_stable_for_large_scores(dtype):
    base = torch.tensor([[3.0, -2.0, 1.0, 0.5]], dtype=torch.float64)
    want = plackett_luce_nll(base).item()
    for shift in (1e3, 1e4, -1e4):
        scores = (base + shift).to(dtype).requires_grad_(True)
        nll = plackett_luce_nll(scores)
        assert torch.isfinite(nll)
        assert nll.item() == pytest.approx(want, abs=1e-3 if dtype == torch.float32 else 1e-8)
        nll.backward()
        assert torch.isfinite(scores.grad).all()
    # Widely spread scores: the winner dominates, so each stage costs ~0 when ordered...
    spread = torch.tensor([[1e4, 0.0, -1e4]], dtype=dtype)
    assert plackett_luce_nll(spread).item() == pytest.approx(math.log1p(math.exp(-1e4)), abs=1e-6)
    # ...and ~the score gap when reversed.
    assert plackett_luce_nll(spread.flip(-1)).item() == pytest.approx(3e4, rel=1e-6)


def test_gradcheck_float64():
    gen = torch.Generator().manual_seed(3)
    scores = torch.randn(4, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([5, 3, 2, 4])
    weights = torch.tensor([1.0, 0.5, 2.0, 0.0], dtype=torch.float64)
    top_k = torch.tensor([4, 1, 3, 2])
    for kwargs in ({}, {"weights": weights}, {"top_k": top_k}, {"reduction": "mean"}):
        assert torch.autograd.gradcheck(
            lambda s, kw=kwargs: plackett_luce_nll(s, lengths, **kw), (scores,)
        )
    pairs = torch.randn(6, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: plackett_luce_nll(s, reduction="none"), (pairs,))


def test_weights_and_reductions():
    gen = torch.Generator().manual_seed(4)
    scores = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    weights = torch.tensor([1.0, 2.0, 0.0, 0.5, 3.0], dtype=torch.float64)
    each = plackett_luce_nll(scores, reduction="none")
    weighted = plackett_luce_nll(scores, weights=weights, reduction="sum")
    assert weighted.item() == pytest.approx((each * weights).sum().item())
    mean = plackett_luce_nll(scores, weights=weights, reduction="mean")
    assert mean.item() == pytest.approx(weighted.item() / weights.sum().item())
    assert plackett_luce_nll(scores, reduction="mean").item() == pytest.approx(each.mean().item())


def test_pair_fast_path_matches_general_path():
    gen = torch.Generator().manual_seed(5)
    scores = torch.randn(50, 2, generator=gen, dtype=torch.float64) * 10
    fast = plackett_luce_nll(scores, reduction="none")
    general = plackett_luce_nll(scores, torch.full((50,), 2), reduction="none")
    torch.testing.assert_close(fast, general)


def test_batch_dimensions():
    gen = torch.Generator().manual_seed(6)
    scores = torch.randn(2, 3, 4, generator=gen, dtype=torch.float64)
    lengths = torch.tensor([[4, 2, 3], [3, 4, 2]])
    nll = plackett_luce_nll(scores, lengths, reduction="none")
    assert nll.shape == (2, 3)
    flat = plackett_luce_nll(scores.reshape(6, 4), lengths.reshape(6), reduction="none")
    torch.testing.assert_close(nll.reshape(6), flat)


def test_bad_input():
    scores = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="lengths must lie in"):
        plackett_luce_nll(scores, torch.tensor([4, 2]))
    with pytest.raises(ValueError, match="lengths must have shape"):
        plackett_luce_nll(scores, torch.tensor([3]))
    with pytest.raises(ValueError, match="weights must be non-negative"):
        plackett_luce_nll(scores, weights=torch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="weights must have shape"):
        plackett_luce_nll(scores, weights=torch.ones(3))
    with pytest.raises(ValueError, match="reduction"):
        plackett_luce_nll(scores, reduction="max")
    with pytest.raises(ValueError, match="top_k"):
        plackett_luce_nll(scores, top_k=-1)


def test_gumbel_rankings_follow_plackett_luce():
    scores = torch.tensor([1.0, 0.0, -1.0], dtype=torch.float64)
    gen = torch.Generator().manual_seed(7)
    n = 20000
    orders = gumbel_rankings(scores.expand(n, -1).clone(), gen)
    perms = list(itertools.permutations(range(3)))
    counts = torch.tensor([(orders == torch.tensor(p)).all(-1).sum().item() for p in perms])
    probs = torch.exp(-plackett_luce_nll(scores[torch.tensor(perms)], reduction="none"))
    expected = probs * n
    chi2 = ((counts - expected) ** 2 / expected).sum().item()
    assert chi2 < 20.5  # 5 degrees of freedom, p ~ 0.001
