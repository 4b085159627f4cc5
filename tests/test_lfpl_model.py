"""Tests of the LFPL module: scoring, ranking and id checks."""

from __future__ import annotations

import pytest
import torch

from botorch_pref.lfpl.dyads import DyadRankings
from botorch_pref.lfpl.factor_model import LFPL
from botorch_pref.lfpl.plackett_luce import plackett_luce_nll


def test_score_is_inner_product_and_rank_sorts():
    gen = torch.Generator().manual_seed(0)
    U = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    V = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    model = LFPL.from_factors(U, V)
    assert (model.n_rows, model.n_cols, model.dim) == (4, 5, 3)
    rows = torch.tensor([0, 3, 2, 1])
    cols = torch.tensor([4, 0, 2, 2])
    scores = model.score(rows, cols)
    torch.testing.assert_close(scores, (U[rows] * V[cols]).sum(-1))
    order = model.rank(rows, cols)
    assert scores[order].diff().le(0).all()
    torch.testing.assert_close(model.score_items(torch.tensor([1, 2])), U[[1, 2]] @ V.T)
    # Broadcasting: one row against every column.
    torch.testing.assert_close(model.score(torch.tensor([2]), torch.arange(5)), U[2] @ V.T)


def test_init_is_seeded_and_follows_dtype():
    a = LFPL(3, 4, 2, seed=1, dtype=torch.float64)
    b = LFPL(3, 4, 2, seed=1, dtype=torch.float64)
    assert a.U.dtype == torch.float64
    torch.testing.assert_close(a.U, b.U)
    assert LFPL(3, 4, 2).U.dtype == torch.float32


def test_unseen_and_out_of_range_ids_raise():
    model = LFPL(4, 3, 2, seed=0)
    model.mark_seen(DyadRankings.from_lists([[(0, 0), (1, 1)]], n_rows=4, n_cols=3))
    model.score(torch.tensor([0, 1]), torch.tensor([1, 0]))  # seen separately: fine
    with pytest.raises(ValueError, match=r"row id\(s\) \[2\] were not seen in training"):
        model.score(torch.tensor([0, 2]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"column id\(s\) \[2\] were not seen"):
        model.rank(torch.tensor([0, 1]), torch.tensor([2, 1]))
    with pytest.raises(ValueError, match=r"row id\(s\) \[7\] out of range \[0, 4\)"):
        model.score(torch.tensor([7]), torch.tensor([0]))
    with pytest.raises(ValueError, match="out of range"):
        model.score(torch.tensor([0]), torch.tensor([-1]))
    with pytest.raises(ValueError, match="must be integers"):
        model.score(torch.tensor([0.0]), torch.tensor([0]))
    with pytest.raises(ValueError, match="not seen"):
        model.score_items(torch.tensor([3]))
    # The check can be switched off (e.g. for validation losses).
    assert model.score(torch.tensor([3]), torch.tensor([2]), check_seen=False).shape == (1,)


def test_nll_matches_plackett_luce():
    model = LFPL(3, 3, 2, seed=0, dtype=torch.float64)
    r = DyadRankings.from_lists([[(0, 0), (1, 2), (2, 1)], [(2, 2), (0, 1)]])
    scores = model(r.rows, r.cols)
    torch.testing.assert_close(model.nll(r), plackett_luce_nll(scores, r.lengths))
    with pytest.raises(ValueError, match="the model 3 and 3"):
        model.nll(DyadRankings.from_lists([[(0, 0), (1, 1)]], n_rows=5, n_cols=3))


def test_bad_construction():
    with pytest.raises(ValueError, match="dim must be a positive integer"):
        LFPL(3, 3, 0)
    with pytest.raises(ValueError, match="same number of columns"):
        LFPL.from_factors(torch.zeros(3, 2), torch.zeros(3, 3))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_scoring():
    model = LFPL(4, 3, 2, seed=0, device="cuda")
    model.mark_seen()
    scores = model.score(torch.tensor([0, 1], device="cuda"), torch.tensor([2, 0], device="cuda"))
    assert scores.is_cuda and model.seen_rows.is_cuda
