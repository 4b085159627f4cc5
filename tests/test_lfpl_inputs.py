"""LFPL inputs once accepted silently or failing deep inside torch, now refused by name."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from botorch_pref.data import Interactions, load_movielens
from botorch_pref.lfpl import (
    LFPL,
    DyadRankings,
    ImplicitFeedback,
    gumbel_rankings,
    leave_one_out,
    plackett_luce_nll,
    sample_lfpl,
)
from botorch_pref.lfpl.recommender import LFPLRecommender


def brute_force_top_k(scores: list[float], k: int) -> float:
    """The first ``k`` Plackett-Luce stages, in float64 Python arithmetic."""
    return sum(
        math.log(sum(math.exp(s) for s in scores[t:])) - scores[t]
        for t in range(min(k, len(scores) - 1))
    )


def test_plackett_luce_nll_top_k_must_match_the_batch_shape():
    scores = torch.tensor(
        [[0.0, 1.0, 2.0, 3.0], [1.0, 0.0, -1.0, 2.0], [0.5, 0.2, 0.1, 0.0]], dtype=torch.float64
    )
    # A (3, 1) column used to broadcast against the (3,) batch into a 3 x 3 grid of rankings.
    for bad in (torch.tensor([[1], [2], [3]]), torch.tensor([[1, 2, 3]]), torch.tensor([1, 2])):
        with pytest.raises(ValueError, match=r"top_k must be an integer or have shape \(3,\)"):
            plackett_luce_nll(scores, top_k=bad)
    top_k = [1, 2, 3]
    want = sum(brute_force_top_k(row, k) for row, k in zip(scores.tolist(), top_k, strict=True))
    assert plackett_luce_nll(scores, top_k=torch.tensor(top_k)).item() == pytest.approx(want)
    # A scalar (0-d or one-element) top_k applies to every ranking.
    want_one = sum(brute_force_top_k(row, 1) for row in scores.tolist())
    for one in (1, torch.tensor(1), torch.tensor([1])):
        assert plackett_luce_nll(scores, top_k=one).item() == pytest.approx(want_one)


@pytest.mark.parametrize("lengths", [None, torch.tensor([3])])
def test_plackett_luce_nll_rejects_integer_scores(lengths):
    with pytest.raises(TypeError, match=r"scores must be a floating tensor, got torch\.int64"):
        plackett_luce_nll(torch.tensor([[2, 1, 0]]), lengths)
    with pytest.raises(TypeError, match="scores must be a floating tensor, got list"):
        plackett_luce_nll([[2.0, 1.0, 0.0]], lengths)


def test_gumbel_rankings_rejects_integer_scores():
    with pytest.raises(TypeError, match=r"scores must be a floating tensor, got torch\.int64"):
        gumbel_rankings(torch.tensor([3, 1, 2]))


@pytest.fixture
def feedback():
    return ImplicitFeedback(torch.tensor([[0, 0], [0, 1], [1, 2], [1, 3], [2, 0]]), 3, 4)


@pytest.mark.parametrize(
    ("user_ids", "item_ids", "error", "message"),
    [
        (["a", "a", "b"], [1, 2, 3, 4], ValueError, "user id 'a' is listed twice"),
        (["a", "b", "c"], [1, 2, 2, 4], ValueError, "item id 2 is listed twice"),
        ([0.5, 1.5, 2.5], [1, 2, 3, 4], TypeError, "user ids must be integers or strings, got 0.5"),
        (["a", "b", "c"], [1, True, 3, 4], TypeError, "item ids must be .* got True"),
    ],
)
def test_fit_feedback_rejects_ambiguous_ids_before_fitting(
    feedback, user_ids, item_ids, error, message
):
    rec = LFPLRecommender(dim=2, epochs=1)
    with pytest.raises(error, match=message):
        rec.fit_feedback(feedback, user_ids, item_ids)
    assert rec.model_ is None and rec.user_ids == []


@pytest.mark.parametrize("as_array", [np.asarray, torch.as_tensor])
def test_fit_feedback_accepts_array_ids_and_saves_them(tmp_path, feedback, as_array):
    rec = LFPLRecommender(dim=2, epochs=2, seed=0)
    rec.fit_feedback(feedback, as_array([10, 20, 30]), as_array([5, 6, 7, 8]))
    assert rec.user_ids == [10, 20, 30] and all(type(u) is int for u in rec.user_ids)
    first = rec.recommend([20], k=2)
    assert all(type(i) is int for i in first.items[0])
    rec.save(tmp_path / "model.pt")
    again = LFPLRecommender.load(tmp_path / "model.pt")
    assert again.recommend([20], k=2) == first


def test_load_movielens_header_without_rows(tmp_path):
    for name, header in (
        ("ratings.csv", "userId,movieId,rating,timestamp"),
        ("tiny.inter", "user_id:token\titem_id:token"),
    ):
        path = tmp_path / name
        path.write_text(header)  # no line break after the header
        with pytest.raises(ValueError, match="the file has no interactions"):
            load_movielens(path)


def test_load_movielens_min_rating_needs_a_rating_column(tmp_path):
    path = tmp_path / "tiny.inter"
    path.write_text("user_id:token\titem_id:token\n1\t2\n3\t4\n")
    with pytest.raises(ValueError, match="min_rating=4 was given, but the file has no ratings"):
        load_movielens(path, min_rating=4)
    assert len(load_movielens(path)) == 2


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"length": 2.5}, TypeError, "length must be an integer, got 2.5"),
        ({"n_rankings": 5.0}, TypeError, "n_rankings must be an integer, got 5.0"),
        ({"dim": True}, TypeError, "dim must be an integer, got True"),
        ({"scale": math.nan}, ValueError, "scale must be positive and finite, got nan"),
        ({"scale": math.inf}, ValueError, "scale must be positive and finite, got inf"),
    ],
)
def test_sample_lfpl_names_the_bad_argument(kwargs, error, message):
    args = {"n_rankings": 5, "length": 2, "n_rows": 3, "n_cols": 3, "dim": 2, **kwargs}
    with pytest.raises(error, match=message):
        sample_lfpl(**args)


# ---------------------------------------------------------------- ids, sizes and counts
@pytest.fixture
def factors():
    U = torch.tensor([[1.0, 0.0], [0.5, -1.0], [0.0, 2.0]], dtype=torch.float64)
    V = torch.tensor([[1.0, 1.0], [-1.0, 0.5], [2.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    return U, V


@pytest.mark.parametrize("rows", [torch.tensor(1), torch.tensor([[0, 1]])])
def test_score_items_needs_one_dimensional_rows(factors, rows):
    model = LFPL.from_factors(*factors)
    with pytest.raises(ValueError, match=r"rows must be a 1-d tensor of row ids, got shape \("):
        model.score_items(rows)


def test_score_items_values_for_one_dimensional_rows(factors):
    U, V = factors
    scores = LFPL.from_factors(U, V).score_items(torch.tensor([2, 0]))
    want = [[sum(a * b for a, b in zip(U[r].tolist(), v, strict=True)) for v in V.tolist()]
            for r in (2, 0)]  # fmt: skip
    assert scores.shape == (2, 4) and scores.tolist() == want


def test_rank_orders_tied_scores_by_position(factors):
    U, V = factors
    # Columns 3 (all zeros) give tied scores 0; the other scores differ.
    n = 40
    cols = torch.tensor([3 if k % 3 else k % 4 for k in range(n)])
    rows = torch.tensor([k % 3 for k in range(n)])
    model = LFPL.from_factors(U, V)
    scores = [float(U[r] @ V[c]) for r, c in zip(rows.tolist(), cols.tolist(), strict=True)]
    want = sorted(range(n), key=lambda k: -scores[k])  # Python's sort is stable
    assert model.rank(rows, cols).tolist() == want
    batched = model.rank(rows.expand(2, n), cols.expand(2, n))
    assert batched.tolist() == [want, want]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_rows": 2.7}, "n_rows must be an integer, got 2.7"),
        ({"n_rows": True}, "n_rows must be an integer, got True"),
        ({"n_cols": 3.0}, "n_cols must be an integer, got 3.0"),
    ],
)
def test_dyad_rankings_refuse_non_integer_sizes(kwargs, message):
    rows, cols = torch.tensor([[0, 1]]), torch.tensor([[0, 0]])
    with pytest.raises(TypeError, match=message):
        DyadRankings(rows, cols, **kwargs)
    sized = DyadRankings(rows, cols, n_rows=np.int64(4), n_cols=2)
    assert (sized.n_rows, sized.n_cols) == (4, 2) and type(sized.n_rows) is int


def _pairs_feedback():
    return ImplicitFeedback(torch.tensor([[0, 0], [0, 1], [1, 2], [1, 3], [2, 0]]), 3, 4)


@pytest.mark.parametrize(
    ("users", "error", "message"),
    [
        (torch.tensor([1, 5]), ValueError, r"user id\(s\) \[5\] out of range \[0, 3\)"),
        (torch.tensor([-1, 0]), ValueError, r"user id\(s\) \[-1\] out of range \[0, 3\)"),
        (torch.tensor([1.0]), ValueError, "users must be integers, got dtype torch.float32"),
        (torch.tensor([1.5]), ValueError, "users must be integers, got 1.5"),
        (torch.tensor([True]), TypeError, "users must be integer ids, got dtype torch.bool"),
        (torch.tensor(1), ValueError, r"users must be a 1-d tensor of user ids, got shape \(\)"),
        (torch.zeros(2, 2, dtype=torch.long), ValueError, r"1-d tensor .* shape \(2, 2\)"),
    ],
)
@pytest.mark.parametrize("method", ["sample_negatives", "exclusion_mask"])
def test_feedback_methods_check_user_ids(method, users, error, message):
    with pytest.raises(error, match=message):
        getattr(_pairs_feedback(), method)(users)


def test_feedback_methods_take_lists_of_user_ids():
    data, gen = _pairs_feedback(), torch.Generator().manual_seed(0)
    draws = data.sample_negatives([1] * 200, gen)
    assert set(draws.tolist()) == {0, 1}
    mask = data.exclusion_mask([1, 0])
    assert mask.tolist() == [[False, False, True, True], [True, True, False, False]]


@pytest.mark.parametrize("size", [2.0, True, "2"])
def test_batches_refuses_a_non_integer_batch_size(size):
    with pytest.raises(TypeError, match=f"batch_size must be an integer, got {size!r}"):
        _pairs_feedback().batches(size)
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        _pairs_feedback().batches(0)
    assert [len(u) for u, _, _ in _pairs_feedback().batches(np.int64(2))] == [2, 2, 1]


@pytest.mark.parametrize("n_folds", [2.0, True, "2"])
def test_kfold_refuses_a_non_integer_number_of_folds(n_folds):
    r = DyadRankings.from_lists([[(0, 1), (1, 0)], [(1, 1), (0, 0)], [(2, 0), (0, 1)]])
    with pytest.raises(TypeError, match=f"n_folds must be an integer, got {n_folds!r}"):
        r.kfold(n_folds)
    with pytest.raises(ValueError, match=r"n_folds must lie in \[2, 3\]"):
        r.kfold(1)
    assert [len(test) for _, test in r.kfold(np.int64(3))] == [1, 1, 1]


@pytest.mark.parametrize("minimum", [2.5, 2.0, True])
def test_leave_one_out_refuses_a_non_integer_minimum(minimum):
    with pytest.raises(TypeError, match=f"min_interactions must be an integer, got {minimum!r}"):
        leave_one_out(_pairs_feedback(), min_interactions=minimum)
    with pytest.raises(ValueError, match="min_interactions must be at least 2, got 1"):
        leave_one_out(_pairs_feedback(), min_interactions=1)
    assert leave_one_out(_pairs_feedback(), min_interactions=3).users.numel() == 0


def test_interactions_from_ids_refuses_a_bare_string():
    """A string is one id, not a sequence of them (it used to be split into characters)."""
    with pytest.raises(TypeError, match="users must be a sequence of ids, not the single id 'abc'"):
        Interactions.from_ids("abc", "xyz")
    with pytest.raises(TypeError, match="items must be a sequence of ids"):
        Interactions.from_ids(["a", "b"], b"xy")
    inter = Interactions.from_ids(["abc", "abc"], ["x", "y"])
    assert inter.user_ids == ["abc"] and inter.item_ids == ["x", "y"]
