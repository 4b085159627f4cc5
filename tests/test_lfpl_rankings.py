"""Tests of the DyadRankings container."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from botorch_pref.lfpl.dyads import DyadRankings


def make() -> DyadRankings:
    return DyadRankings.from_lists(
        [[(0, 1), (2, 0)], [(1, 1), (0, 0), (2, 1)], [(3, 0), (0, 1), (1, 0), (2, 2)]]
    )


def test_from_lists_pads_and_infers_sizes():
    r = make()
    assert len(r) == 3 and r.max_length == 4
    assert (r.n_rows, r.n_cols) == (4, 3)
    assert r.lengths.tolist() == [2, 3, 4]
    assert r.rows[0].tolist() == [0, 2, 0, 0]  # zero padding
    assert r.mask.sum().item() == 9
    assert r.to_lists()[1] == [(1, 1), (0, 0), (2, 1)]
    assert r.seen_rows().tolist() == [True, True, True, True]
    assert r.seen_cols().tolist() == [True, True, True]


def test_explicit_sizes_and_tensor_constructor():
    rows = torch.tensor([[0, 1, 9], [1, 0, 0]])
    cols = torch.tensor([[0, 0, 9], [2, 2, 0]])
    r = DyadRankings(rows, cols, torch.tensor([2, 2]), n_rows=5, n_cols=4)
    assert (r.n_rows, r.n_cols) == (5, 4)
    assert r.rows[0, 2].item() == 0  # padding is canonicalised
    assert r.seen_rows().tolist() == [True, True, False, False, False]


@pytest.mark.parametrize(
    ("rankings", "kwargs", "message"),
    [
        ([[(0, 0), (1, 0)], [(2, 1)]], {}, "ranking 1 has length 1"),
        ([[(0, 0), (5, 0)]], {"n_rows": 3}, "row id 5 is out of range"),
        ([[(0, 0), (1, 4)]], {"n_cols": 2}, "column id 4 is out of range"),
        ([[(0, 0), (-1, 0)]], {"n_rows": 3}, "row id -1 is out of range"),
        ([[(0, 0), (1, 1)], [(2, 1), (0, 0), (2, 1)]], {}, r"lists the dyad \(2, 1\) twice"),
        ([[(0, 0, 1), (1, 1)]], {}, "each dyad must be a"),
    ],
)
def test_bad_input_raises_clear_errors(rankings, kwargs, message):
    with pytest.raises(ValueError, match=message):
        DyadRankings.from_lists(rankings, **kwargs)


def test_bad_tensors():
    with pytest.raises(ValueError, match="same shape"):
        DyadRankings(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="integers"):
        DyadRankings(torch.zeros(2, 2), torch.zeros(2, 2))
    with pytest.raises(ValueError, match="exceeds the padded width"):
        DyadRankings(
            torch.tensor([[0, 1]]), torch.tensor([[0, 0]]), torch.tensor([3]), n_rows=2, n_cols=1
        )


def test_same_dyad_in_different_rankings_is_fine():
    r = DyadRankings.from_lists([[(0, 0), (1, 1)], [(1, 1), (0, 0)]])
    assert len(r) == 2


def test_kfold_partitions_the_rankings():
    gen = torch.Generator().manual_seed(0)
    rows = torch.stack([torch.randperm(20, generator=gen)[:4] for _ in range(23)])
    r = DyadRankings(rows, torch.zeros_like(rows), n_rows=20, n_cols=1)
    folds = r.kfold(5, seed=1)
    assert len(folds) == 5
    tested = []
    for train, test in folds:
        assert len(train) + len(test) == 23
        assert len(test) in (4, 5)
        test_keys = {tuple(x) for x in test.rows.tolist()}
        train_keys = {tuple(x) for x in train.rows.tolist()}
        assert not test_keys & train_keys
        tested += test.rows.tolist()
    assert sorted(map(tuple, tested)) == sorted(map(tuple, rows.tolist()))
    assert [len(t) for _, t in r.kfold(5, seed=1)] == [len(t) for _, t in folds]
    with pytest.raises(ValueError, match="n_folds"):
        r.kfold(1)


def test_split_and_indexing_trim_padding():
    r = make()
    train, test = r.split(1 / 3, seed=0)
    assert len(train) == 2 and len(test) == 1
    sub = r[[0]]
    assert sub.max_length == 2 and sub.to_lists() == [[(0, 1), (2, 0)]]
    assert r[1:].to_lists() == r.to_lists()[1:]
    # Every documented index type: an int of any kind, a 0-d tensor, an empty list.
    for index in (1, torch.tensor(1), np.int64(1)):
        assert r[index].to_lists() == [r.to_lists()[1]]
    assert len(r[[]]) == 0 and r[[]].max_length == 0
    assert (sub.n_rows, sub.n_cols) == (r.n_rows, r.n_cols)
    with pytest.raises(ValueError, match="test_fraction"):
        r.split(1.5)


def test_to_device_keeps_content():
    r = make().to("cpu")
    assert r.device.type == "cpu" and r.to_lists() == make().to_lists()
    assert "n_rankings=3" in repr(r)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_valid_random_rankings_round_trip(data):
    n_rows = data.draw(st.integers(1, 4))
    n_cols = data.draw(st.integers(1, 4))
    dyads = [(i, j) for i in range(n_rows) for j in range(n_cols)]
    if len(dyads) < 2:
        return
    rankings = data.draw(
        st.lists(
            st.lists(st.sampled_from(dyads), min_size=2, max_size=len(dyads), unique=True),
            min_size=1,
            max_size=5,
        )
    )
    r = DyadRankings.from_lists(rankings, n_rows=n_rows, n_cols=n_cols)
    assert r.to_lists() == [list(x) for x in rankings]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_move():
    r = make().to("cuda")
    assert r.rows.is_cuda and r.lengths.is_cuda and r.to_lists() == make().to_lists()
    train, test = r.kfold(3)[0]
    assert train.rows.is_cuda and test.rows.is_cuda
