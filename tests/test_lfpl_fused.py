"""The fused LFPL/IF step against autograd and ``torch.optim.Adagrad`` on the same batches."""

from __future__ import annotations

import pytest
import torch

from botorch_pref.lfpl.fused import RowAdagrad, choice_step, hardest_negatives
from botorch_pref.lfpl.plackett_luce import plackett_luce_nll


def _batch(n_users, n_items, batch, n_neg, seed):
    gen = torch.Generator().manual_seed(seed)
    users = torch.randint(n_users, (batch,), generator=gen)
    positives = torch.randint(n_items, (batch,), generator=gen)
    negatives = torch.randint(n_items, (batch, n_neg), generator=gen)
    return users, positives, negatives


def _items(batch):
    """``(users, items)``: the observed item first in each row of items."""
    users, positives, negatives = batch
    return users, torch.cat([positives.unsqueeze(-1), negatives], dim=-1)


def _reference_loss(U, V, users, positives, negatives, reg):
    """The mean penalised choice loss, through plackett_luce_nll (top-1 of L + 1)."""
    u, vp, vn = U[users], V[positives], V[negatives]
    scores = torch.cat([(u * vp).sum(-1, keepdim=True), (vn * u.unsqueeze(1)).sum(-1)], -1)
    nll = plackett_luce_nll(scores, top_k=1)
    penalty = u.square().sum() + vp.square().sum() + vn.square().sum()
    return (nll + 0.5 * reg * penalty) / users.shape[0]


@pytest.mark.parametrize(("n_users", "n_items"), [(5, 7), (200, 300)])  # dense and row paths
@pytest.mark.parametrize("alternating", [True, False])
@pytest.mark.parametrize("n_neg", [1, 4])
def test_fused_step_equals_autograd_adagrad(n_users, n_items, alternating, n_neg):
    gen = torch.Generator().manual_seed(1)
    U0 = torch.randn(n_users, 3, generator=gen, dtype=torch.float64)
    V0 = torch.randn(n_items, 3, generator=gen, dtype=torch.float64)
    reg, lr = 0.3, 0.2
    # Reference: autograd and torch's AdaGrad (U first, then V with the new U, or joint).
    U, V = U0.clone().requires_grad_(), V0.clone().requires_grad_()
    opt_ref_u, opt_ref_v = torch.optim.Adagrad([U], lr=lr), torch.optim.Adagrad([V], lr=lr)
    fused_u, fused_v = RowAdagrad(U0.clone()), RowAdagrad(V0.clone())
    for step in range(4):
        batch = _batch(n_users, n_items, 6, n_neg, seed=step)
        if alternating:
            for opt, detach in ((opt_ref_u, "V"), (opt_ref_v, "U")):
                opt.zero_grad()
                loss = _reference_loss(
                    U if detach == "V" else U.detach(), V.detach() if detach == "V" else V,
                    *batch, reg,
                )  # fmt: skip
                loss.backward()
                opt.step()
        else:
            opt_ref_u.zero_grad(), opt_ref_v.zero_grad()
            _reference_loss(U, V, *batch, reg).backward()
            opt_ref_u.step(), opt_ref_v.step()
        nll = choice_step(fused_u, fused_v, *_items(batch), reg=reg, lr=lr, alternating=alternating)
        assert torch.isfinite(nll)
    torch.testing.assert_close(fused_u.table, U.detach())
    torch.testing.assert_close(fused_v.table, V.detach())
    torch.testing.assert_close(fused_v.sum_sq, opt_ref_v.state[V]["sum"])


def test_step_loss_is_the_batch_nll_before_the_step():
    U = torch.randn(4, 2, dtype=torch.float64)
    V = torch.randn(6, 2, dtype=torch.float64)
    batch = _batch(4, 6, 5, 3, seed=0)
    expected = _reference_loss(U, V, *batch, reg=0.0) * 5
    nll = choice_step(RowAdagrad(U.clone()), RowAdagrad(V.clone()), *_items(batch), reg=0.7, lr=0.1)
    torch.testing.assert_close(nll, expected)


def test_repeated_rows_sum_their_gradients():
    table = torch.zeros(10, 2, dtype=torch.float64)
    opt = RowAdagrad(table)
    ids = torch.tensor([3, 3, 7])
    opt.step(ids, torch.tensor([[1.0, 0.0], [1.0, 2.0], [0.5, 0.5]], dtype=torch.float64), lr=1)
    # One AdaGrad step from zero state moves each touched coordinate by -lr * sign(g).
    expected = torch.zeros(10, 2, dtype=torch.float64)
    expected[3] = -1.0
    expected[7] = -1.0
    torch.testing.assert_close(table, expected, atol=1e-9, rtol=0)
    assert opt.grad.abs().sum() == 0


# Grouped by a radix sort (most rows hit), summed with index_add_ (few rows hit).
@pytest.mark.parametrize(("n_rows", "n"), [(8, 40), (400, 5)])
def test_accumulate_sums_gradients_per_row_in_order(n_rows, n):
    gen = torch.Generator().manual_seed(2)
    ids = torch.randint(n_rows, (n,), generator=gen)
    grads = torch.randn(n, 3, generator=gen)
    opt = RowAdagrad(torch.zeros(n_rows, 3))
    opt.accumulate(ids, grads)
    expected = torch.zeros(n_rows, 3)
    for i in range(n):  # in the order of ids: the same float32 sums
        expected[ids[i]] += grads[i]
    assert torch.equal(opt.grad, expected)


# Grouped by a radix sort, summed with index_add_, the sparse-dense product (a table too big
# for 16-bit ids).
@pytest.mark.parametrize(("n_rows", "n"), [(4, 6), (500, 6), (2**15 + 4, 3000)])
def test_accumulate_outer_sums_weighted_vectors_per_row(n_rows, n):
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(4, (n, 3), generator=gen) * (n_rows // 4)
    ids[0, 0] = n_rows - 1
    weights = torch.randn(n, 3, generator=gen, dtype=torch.float64)
    factors = torch.randn(n, 2, generator=gen, dtype=torch.float64)
    opt = RowAdagrad(torch.zeros(n_rows, 2, dtype=torch.float64))
    opt.accumulate_outer(ids, weights, factors)
    expected = torch.zeros(n_rows, 2, dtype=torch.float64)
    for b in range(min(n, 6)):
        for m in range(3):
            expected[ids[b, m]] += weights[b, m] * factors[b]
    if n > 6:
        products = weights[6:].unsqueeze(-1) * factors[6:].unsqueeze(1)
        expected.index_add_(0, ids[6:].reshape(-1), products.reshape(-1, 2))
    torch.testing.assert_close(opt.grad, expected)


def test_grouped_item_gradients_equal_the_sparse_product():
    gen = torch.Generator().manual_seed(1)
    n_rows, n, m = 300, 400, 6
    ids = torch.randint(n_rows, (n, m), generator=gen)
    weights, factors = torch.randn(n, m, generator=gen), torch.randn(n, 16, generator=gen)
    opt = RowAdagrad(torch.zeros(n_rows, 16))
    opt.accumulate_outer(ids, weights, factors)
    cols = torch.arange(n).repeat_interleave(m)
    matrix = torch.sparse_coo_tensor(
        torch.stack([ids.reshape(-1), cols]),
        weights.reshape(-1),
        (n_rows, n),
        check_invariants=True,
    )
    torch.testing.assert_close(opt.grad, torch.sparse.mm(matrix, factors), rtol=1e-6, atol=1e-6)


def test_hardest_negatives_keeps_the_top_scored_candidates():
    U = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    V = torch.tensor([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [0.0, 3.0]])
    candidates = torch.tensor([[0, 1, 2, 3], [0, 1, 2, 3]])
    top = hardest_negatives(U, V, torch.tensor([0, 1]), candidates, 2)
    assert sorted(top[0].tolist()) == [1, 2]
    assert 3 in top[1].tolist()


@pytest.mark.cuda
def test_fused_step_on_cuda_matches_cpu():
    U0 = torch.randn(50, 4, dtype=torch.float64)
    V0 = torch.randn(80, 4, dtype=torch.float64)
    batch = _batch(50, 80, 32, 3, seed=0)
    cpu_u, cpu_v = RowAdagrad(U0.clone()), RowAdagrad(V0.clone())
    gpu_u, gpu_v = RowAdagrad(U0.cuda()), RowAdagrad(V0.cuda())
    choice_step(cpu_u, cpu_v, *_items(batch), reg=0.1, lr=0.1)
    choice_step(gpu_u, gpu_v, *(t.cuda() for t in _items(batch)), reg=0.1, lr=0.1)
    torch.testing.assert_close(gpu_u.table.cpu(), cpu_u.table)
    torch.testing.assert_close(gpu_v.table.cpu(), cpu_v.table)
