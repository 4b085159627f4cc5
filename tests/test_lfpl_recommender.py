"""LFPLRecommender: original ids, brute-force top-k, save/load without pickle, errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from botorch_pref.data import Interactions
from botorch_pref.lfpl import LFPL, ImplicitFeedback, fit_implicit
from botorch_pref.lfpl.recommender import LFPLRecommender


def _pairs(n_users=12, n_items=15, seed=0):
    gen = torch.Generator().manual_seed(seed)
    pairs = []
    for u in range(n_users):
        for i in torch.randperm(n_items, generator=gen)[:5].tolist():
            pairs.append((f"user-{u}", 100 + 7 * i))  # string users, sparse int items
    return pairs


@pytest.fixture(scope="module")
def fitted():
    return LFPLRecommender(dim=3, epochs=5, batch_size=16, seed=0).fit(_pairs())


def test_fit_keeps_original_ids_and_matches_fit_implicit(fitted):
    assert fitted.user_ids == sorted({u for u, _ in _pairs()})
    assert fitted.item_ids == sorted({i for _, i in _pairs()})
    # The same fit through the indexed API gives the same factors.
    inter = Interactions.from_ids([u for u, _ in _pairs()], [i for _, i in _pairs()])
    data = ImplicitFeedback(inter.pairs, inter.n_users, inter.n_items)
    model = LFPL(data.n_users, data.n_items, 3, seed=0)
    fit_implicit(model, data, epochs=5, batch_size=16, seed=0)
    torch.testing.assert_close(fitted.model_.U, model.U)


def test_recommend_is_brute_force_top_k_without_seen_items(fitted):
    users = ["user-3", "user-0"]
    scores = fitted.score_items(users)
    assert not scores.requires_grad and scores.numpy().shape == (2, len(fitted.item_ids))
    U, V = fitted.model_.U.detach(), fitted.model_.V.detach()
    seen = {u: {i for uu, i in _pairs() if uu == u} for u in users}
    result = fitted.recommend(users, k=4)
    assert result.users == users
    for row, user in enumerate(users):
        u = fitted.user_ids.index(user)
        brute = sorted(
            ((float(U[u] @ V[j]), item) for j, item in enumerate(fitted.item_ids)
             if item not in seen[user]),
            reverse=True,
        )[:4]  # fmt: skip
        assert result.items[row] == [item for _, item in brute]
        assert result.scores[row] == pytest.approx([s for s, _ in brute], rel=1e-5)
    everything = fitted.recommend("user-3", k=100, exclude_seen=False)
    assert len(everything.items[0]) == len(fitted.item_ids)
    # Only 10 unseen items: asking for more returns those.
    assert len(fitted.recommend("user-3", k=100).items[0]) == len(fitted.item_ids) - 5


def test_save_load_round_trip_without_pickle(fitted, tmp_path):
    path = tmp_path / "model.pt"
    fitted.info["note"] = "kept"
    fitted.save(path)
    payload = torch.load(path, weights_only=True)
    assert set(payload) == {"meta", "U", "V", "seen_rows", "seen_cols", "train_pairs"}
    meta = json.loads(payload["meta"])
    assert meta["params"] == fitted.params and meta["item_ids"] == fitted.item_ids
    loaded = LFPLRecommender.load(path)
    assert loaded.params == fitted.params and loaded.info["note"] == "kept"
    assert loaded.user_ids == fitted.user_ids and loaded.item_ids == fitted.item_ids
    assert loaded.recommend(["user-1"], k=3) == fitted.recommend(["user-1"], k=3)
    torch.testing.assert_close(loaded.score_items(["user-2"]), fitted.score_items(["user-2"]))


def test_integer_ids_are_not_confused_with_bools_floats_or_strings(tmp_path):
    rec = LFPLRecommender(dim=2, epochs=2).fit([(1, 10), (1, 11), (2, 11), (2, 12)])
    for bad, error in ((True, TypeError), (1.0, TypeError), ("1", ValueError)):
        with pytest.raises(error, match=repr(bad).strip("'")):
            rec.recommend([bad])
    with pytest.raises(ValueError, match=r"unknown user id\(s\) \[3\]"):
        rec.score_items([3])


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"dim": 0}, ValueError, "dim must be at least 1, got 0"),
        ({"lr": math.nan}, ValueError, "lr must be positive and finite, got nan"),
        ({"method": "newton"}, ValueError, "method must be one of"),
        ({"dtype": torch.int64}, TypeError, "dtype must be torch.float32 or torch.float64"),
        ({"device": "bogus"}, ValueError, "device 'bogus' is not a torch device"),
    ],
)
def test_bad_settings(kwargs, error, message):
    with pytest.raises(error, match=message):
        LFPLRecommender(**kwargs)


def test_an_array_of_pairs_fits_like_the_list_of_tuples():
    pairs = [(1, 10), (1, 11), (2, 11), (2, 12), (3, 10), (3, 12)]
    want = LFPLRecommender(dim=2, epochs=2, seed=0).fit(pairs)
    for array in (np.array(pairs), torch.tensor(pairs)):
        got = LFPLRecommender(dim=2, epochs=2, seed=0).fit(array)
        assert (got.user_ids, got.item_ids) == (want.user_ids, want.item_ids)
        torch.testing.assert_close(got.model_.U, want.model_.U)


def test_bad_interactions_and_calls():
    with pytest.raises(TypeError, match=r"user ids must be all integers or all strings.*1.5"):
        LFPLRecommender().fit([(1.5, 2), (1, 3)])
    with pytest.raises(ValueError, match="blank user id"):
        LFPLRecommender().fit([("", 2), ("a", 3)])
    with pytest.raises(ValueError, match=r"interaction 1 must be a \(user id, item id\) pair"):
        LFPLRecommender().fit([(1, 2), (1, 2, 3)])
    with pytest.raises(ValueError, match="not fitted"):
        LFPLRecommender().recommend([1])
    # A user who interacted with every item has no negative to learn from: named by its id.
    with pytest.raises(ValueError, match="user 'a' has interacted with every one of the 2 items"):
        LFPLRecommender(dim=2, epochs=1).fit([("a", 1), ("a", 2), ("b", 1)])
    with pytest.raises(ValueError, match=r"must have shape \(n, 2\), got \(2, 3\)"):
        LFPLRecommender().fit(torch.zeros(2, 3, dtype=torch.long))
    rec = LFPLRecommender(dim=2, epochs=1).fit([(1, 10), (2, 11)])
    with pytest.raises(ValueError, match="k must be at least 1, got 0"):
        rec.recommend([1], k=0)
    with pytest.raises(TypeError, match="exclude_seen must be a bool"):
        rec.recommend([1], exclude_seen="no")


@pytest.mark.cuda
def test_recommender_on_cuda(tmp_path):
    rec = LFPLRecommender(dim=3, epochs=3, device="cuda").fit(_pairs())
    assert rec.model_.U.is_cuda
    rec.save(tmp_path / "m.pt")
    loaded = LFPLRecommender.load(tmp_path / "m.pt")
    assert loaded.recommend(["user-1"], k=3).items == rec.recommend(["user-1"], k=3).items
