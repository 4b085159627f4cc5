"""Tests of LFPL/IF: the interaction index, the negative sampler, leave-one-out and metrics."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from botorch_pref.lfpl import implicit
from botorch_pref.lfpl.factor_model import LFPL
from botorch_pref.lfpl.implicit import (
    ImplicitFeedback,
    LeaveOneOutSplit,
    MostPopular,
    Random,
    evaluate,
    fit_implicit,
    leave_one_out,
)
from botorch_pref.lfpl.metrics import heldout_item_metrics, kendall_tau


@st.composite
def interactions(draw):
    n_users = draw(st.integers(1, 6))
    n_items = draw(st.integers(2, 8))
    pairs = []
    for user in range(n_users):
        # Every user leaves at least one item unobserved.
        items = draw(st.sets(st.integers(0, n_items - 1), min_size=1, max_size=n_items - 1))
        pairs += [(user, item) for item in items]
    return pairs, n_users, n_items


@settings(max_examples=60, deadline=None)
@given(interactions(), st.integers(0, 2**31 - 1), st.integers(1, 7))
def test_sampler_never_yields_an_observed_negative(case, seed, batch_size):
    pairs, n_users, n_items = case
    data = ImplicitFeedback(torch.tensor(pairs), n_users, n_items)
    observed = set(pairs)
    gen = torch.Generator().manual_seed(seed)
    users = torch.randint(n_users, (200,), generator=gen)
    negatives = data.sample_negatives(users, gen, max_rounds=2)
    assert all(
        (u, j) not in observed for u, j in zip(users.tolist(), negatives.tolist(), strict=True)
    )
    seen_positives = []
    for u, p, n in data.batches(batch_size, gen):
        assert u.shape[0] <= batch_size
        for user, pos, neg in zip(u.tolist(), p.tolist(), n.tolist(), strict=True):
            assert (user, pos) in observed and (user, neg) not in observed
            seen_positives.append((user, pos))
    assert sorted(seen_positives) == sorted(observed)  # each positive once per epoch


def test_nearly_saturated_user_gets_the_only_free_item():
    n_items = 50
    pairs = [(0, i) for i in range(n_items) if i != 17] + [(1, 3)]
    data = ImplicitFeedback(torch.tensor(pairs), 2, n_items)
    gen = torch.Generator().manual_seed(0)
    negatives = data.sample_negatives(torch.zeros(300, dtype=torch.long), gen, max_rounds=1)
    assert negatives.unique().tolist() == [17]


def test_saturated_user_raises():
    data = ImplicitFeedback(torch.tensor([[0, 0], [0, 1], [1, 0]]), 2, 2)
    with pytest.raises(ValueError, match="user 0 has interacted with every item"):
        data.sample_negatives(torch.tensor([1, 0]))
    assert data.sample_negatives(torch.tensor([1, 1])).tolist() == [1, 1]


def test_index_contains_and_exclusion_mask():
    pairs = torch.tensor([[2, 1], [0, 3], [0, 1], [2, 1], [1, 0], [0, 0]])
    data = ImplicitFeedback(pairs, 4, 5)
    assert len(data) == 5  # the duplicate (2, 1) is merged
    assert data.pairs.tolist() == [[0, 0], [0, 1], [0, 3], [1, 0], [2, 1]]
    assert data.user_counts().tolist() == [3, 1, 1, 0]
    assert data.item_counts().tolist() == [2, 2, 0, 1, 0]
    users = torch.arange(4).repeat_interleave(5)
    items = torch.arange(5).repeat(4)
    want = [
        (u, i) in {(0, 0), (0, 1), (0, 3), (1, 0), (2, 1)}
        for u, i in zip(users.tolist(), items.tolist(), strict=True)
    ]
    assert data.contains(users, items).tolist() == want
    mask = data.exclusion_mask(torch.tensor([2, 0, 3]))
    assert mask.tolist() == [
        [False, True, False, False, False],
        [True, True, False, True, False],
        [False] * 5,
    ]


def test_contains_by_binary_search_equals_the_bitmap():
    gen = torch.Generator().manual_seed(3)
    pairs = torch.stack(
        [torch.randint(30, (200,), generator=gen), torch.randint(40, (200,), generator=gen)], 1
    )
    data = ImplicitFeedback(pairs, 30, 40)
    users = torch.randint(30, (7, 50), generator=gen)
    items = torch.randint(40, (7, 50), generator=gen)
    by_bitmap = data.contains(users, items)
    data._bitmap = None  # the large-data path: a binary search in the sorted keys
    by_search = data.contains(users, items)
    observed = set(map(tuple, pairs.tolist()))
    want = [
        (u, i) in observed
        for u, i in zip(users.flatten().tolist(), items.flatten().tolist(), strict=True)
    ]
    assert by_bitmap.shape == by_search.shape == (7, 50)
    assert by_bitmap.flatten().tolist() == want == by_search.flatten().tolist()
    negatives = data.sample_negatives(users.flatten(), gen)
    assert not data.contains(users.flatten(), negatives).any()


def test_duplicates_keep_the_latest_timestamp():
    pairs = torch.tensor([[0, 1], [0, 1], [1, 0]])
    data = ImplicitFeedback(pairs, timestamps=torch.tensor([5, 9, 2]))
    assert data.timestamps.tolist() == [9, 2]
    # Negative times (before 1970) in every integer and floating dtype.
    for dtype in (torch.int32, torch.int64, torch.float32, torch.float64):
        data = ImplicitFeedback(pairs, timestamps=torch.tensor([-5, -3, -7], dtype=dtype))
        assert data.timestamps.tolist() == [-3, -7] and data.timestamps.dtype == dtype


@pytest.mark.parametrize(
    ("pairs", "kwargs", "message"),
    [
        ([[0, 1], [3, 0]], {"n_users": 2}, "interaction 1: user id 3 is out of range"),
        ([[0, 1], [1, -1]], {}, "item id -1 is out of range"),
        ([[0, 1, 2]], {}, r"shape \(n, 2\)"),
        ([[0.0, 1.0]], {}, "integers"),
    ],
)
def test_bad_interactions(pairs, kwargs, message):
    with pytest.raises(ValueError, match=message):
        ImplicitFeedback(torch.tensor(pairs), **kwargs)


def test_leave_one_out():
    gen = torch.Generator().manual_seed(0)
    pairs = torch.stack(
        [torch.randint(30, (400,), generator=gen), torch.randint(40, (400,), generator=gen)], -1
    )
    pairs = torch.cat([pairs, torch.tensor([[30, 5]])])  # user 30 has one interaction only
    data = ImplicitFeedback(pairs, 31, 40, timestamps=torch.randperm(401, generator=gen))
    split = leave_one_out(data, seed=1)
    counts = data.user_counts()
    assert split.users.tolist() == (counts >= 2).nonzero().squeeze(-1).tolist()
    assert 30 not in split.users.tolist()
    assert not split.train.contains(split.users, split.items).any()
    assert data.contains(split.users, split.items).all()
    assert len(split.train) + split.users.numel() == len(data)
    again = leave_one_out(data, seed=1)
    assert torch.equal(again.items, split.items)
    assert not torch.equal(leave_one_out(data, seed=2).items, split.items)
    latest = leave_one_out(data, by="latest")
    for user, item in zip(latest.users.tolist(), latest.items.tolist(), strict=True):
        mine = data.users == user
        newest = data.items[mine][data.timestamps[mine].argmax()].item()
        assert item == newest
    with pytest.raises(ValueError, match="timestamps"):
        leave_one_out(ImplicitFeedback(pairs), by="latest")


def brute_force_metrics(scores, target, excluded, k):
    """Per-user AUC, HR@k and NDCG@k by enumeration of pairs and of tie orders."""
    negatives = [j for j in range(len(scores)) if j not in excluded and j != target]
    s = scores[target]
    auc = sum(1.0 if s > scores[j] else 0.5 if s == scores[j] else 0.0 for j in negatives)
    auc /= len(negatives)
    above = sum(scores[j] > s for j in negatives)
    tied = sum(scores[j] == s for j in negatives)
    # The target's rank is equally likely to be each of above, ..., above + tied.
    ranks = range(above, above + tied + 1)
    hr = sum(r < k for r in ranks) / len(ranks)
    ndcg = sum(1 / math.log2(r + 2) for r in ranks if r < k) / len(ranks)
    return auc, hr, ndcg


def test_metrics_against_brute_force():
    # Integer-valued scores on purpose: many ties.
    gen = torch.Generator().manual_seed(0)
    n_users, n_items, k = 12, 15, 3
    scores = torch.randint(0, 4, (n_users, n_items), generator=gen).double()
    exclude = torch.rand(n_users, n_items, generator=gen) < 0.3
    target = torch.tensor([int((~row).nonzero()[0, 0]) for row in exclude])
    got = heldout_item_metrics(scores, target, exclude, k=k)
    for u in range(n_users):
        excluded = set(exclude[u].nonzero().squeeze(-1).tolist())
        auc, hr, ndcg = brute_force_metrics(scores[u].tolist(), int(target[u]), excluded, k)
        assert got["auc"][u].item() == pytest.approx(auc)
        assert got["hr"][u].item() == pytest.approx(hr)
        assert got["ndcg"][u].item() == pytest.approx(ndcg)
    # A 0/1 mask of another dtype is refused: `~` on integers is not a logical not.
    with pytest.raises(TypeError, match=r"exclude must be a boolean mask, got dtype torch\.int64"):
        heldout_item_metrics(scores, target, exclude.long(), k=k)


def test_evaluate_on_a_tiny_data_set():
    # 3 users, 5 items; hand-made scores.
    train = ImplicitFeedback(torch.tensor([[0, 0], [0, 1], [1, 2], [2, 0], [2, 4]]), 3, 5)
    split = LeaveOneOutSplit(train, users=torch.tensor([0, 1, 2]), items=torch.tensor([2, 0, 1]))

    class Fixed:
        def score_items(self, rows):
            table = torch.tensor(
                [
                    [9.0, 9.0, 1.0, 0.5, 3.0],  # target 2 vs unobserved {3, 4}: beats 3 only
                    [0.7, 0.1, 5.0, 0.7, 0.2],  # target 0 vs {1, 3, 4}: beats 1 and 4, ties 3
                    [1.0, 2.0, 3.0, 4.0, 0.0],  # target 1 vs {2, 3}: beats none
                ]
            )
            return table[rows]

    result = evaluate(Fixed(), split, k=1)
    torch.testing.assert_close(result.per_user["auc"], torch.tensor([0.5, 2.5 / 3, 0.0]))
    torch.testing.assert_close(result.per_user["hr"], torch.tensor([0.0, 0.5, 0.0]))
    assert result.auc == pytest.approx((0.5 + 2.5 / 3) / 3)
    assert result.n_users == 3 and result.k == 1


def test_baselines():
    gen = torch.Generator().manual_seed(0)
    n_users, n_items = 200, 60
    # Popularity-driven data: item j is chosen with probability ~ 1 / (j + 1).
    probs = 1.0 / torch.arange(1, n_items + 1)
    items = torch.multinomial(probs.expand(n_users, -1), 8, generator=gen)
    pairs = torch.stack([torch.arange(n_users).repeat_interleave(8), items.reshape(-1)], -1)
    split = leave_one_out(ImplicitFeedback(pairs, n_users, n_items), seed=0)
    popular = evaluate(MostPopular(split.train), split)
    chance = evaluate(Random(n_items, seed=0), split)
    assert popular.auc > 0.75
    assert abs(chance.auc - 0.5) < 0.05
    assert popular.hr > chance.hr


def implicit_synthetic(seed=0):
    """Users interact with their 10 favourite items under a 3-d latent model."""
    gen = torch.Generator().manual_seed(seed)
    n_users, n_items = 80, 100
    U = torch.randn(n_users, 3, generator=gen)
    V = torch.randn(n_items, 3, generator=gen)
    top = (U @ V.T).topk(10, dim=-1).indices
    pairs = torch.stack([torch.arange(n_users).repeat_interleave(10), top.reshape(-1)], -1)
    return ImplicitFeedback(pairs, n_users, n_items)


@pytest.mark.parametrize(("method", "optimizer"), [("joint", "adagrad"), ("alternating", "adam")])
def test_fit_implicit_learns_preferences(method, optimizer):
    data = implicit_synthetic()
    split = leave_one_out(data, seed=0)
    model = LFPL(data.n_users, data.n_items, 3, seed=1)
    lr = 0.3 if optimizer == "adagrad" else 0.02
    fit = fit_implicit(
        model,
        split.train,
        epochs=60,
        batch_size=256,
        lr=lr,
        reg=1e-3,
        method=method,
        optimizer=optimizer,
    )
    ours = evaluate(model, split)
    popular = evaluate(MostPopular(split.train), split)
    assert ours.auc > 0.9 and ours.auc > popular.auc + 0.1
    assert fit.train_loss[-1] < fit.train_loss[0]
    assert model.seen_rows.all()


def test_fit_implicit_with_validation_stops_early():
    data = implicit_synthetic(seed=1)
    split = leave_one_out(data, seed=0)
    inner = leave_one_out(split.train, seed=1)
    validation = ImplicitFeedback(
        torch.stack([inner.users, inner.items], -1), data.n_users, data.n_items
    )
    model = LFPL(data.n_users, data.n_items, 8, seed=0)
    fit = fit_implicit(
        model,
        inner.train,
        validation=validation,
        epochs=400,
        batch_size=128,
        lr=0.3,
        reg=0.0,
        patience=3,
    )
    assert fit.stopped_early and len(fit.val_loss) == fit.epochs_run
    assert fit.val_loss[fit.best_epoch] == min(fit.val_loss)


def test_default_rate_follows_the_schedule():
    data = implicit_synthetic()

    def fitted(**kwargs):
        model = LFPL(data.n_users, data.n_items, 3, seed=0)
        fit_implicit(model, data, epochs=2, batch_size=64, **kwargs)
        return model.U.detach()

    for schedule, rate, other in (("linear", 0.3, 0.1), ("constant", 0.1, 0.3)):
        default = fitted(lr_schedule=schedule)
        torch.testing.assert_close(default, fitted(lr_schedule=schedule, lr=rate))
        assert not torch.allclose(default, fitted(lr_schedule=schedule, lr=other))
    # The linear schedule is the default.
    torch.testing.assert_close(fitted(), fitted(lr_schedule="linear", lr=0.3))


def test_prefetched_batches_equal_the_sequential_ones():
    data = implicit_synthetic()

    def epochs(prefetch, stop=None):
        generator = torch.Generator().manual_seed(3)
        draws = implicit._epochs_of_batches(
            lambda: implicit._epoch_batches(data, 4, generator, 5), 6, prefetch
        )
        out = [batches for _, batches in zip(range(stop or 6), draws, strict=False)]
        draws.close()  # early stopping: the draw ahead is waited for and dropped
        return out

    sequential = epochs(False)
    assert len(sequential) == 6
    for got in (epochs(True), epochs(True, stop=2)):
        for batches, expected in zip(got, sequential, strict=False):
            for (users, items), (users_0, items_0) in zip(batches, expected, strict=True):
                assert torch.equal(users, users_0) and torch.equal(items, items_0)
    # A different generator state gives different batches.
    assert not torch.equal(sequential[0][0][1], sequential[1][0][1])


def test_prefetch_changes_no_result():
    data = implicit_synthetic()
    factors = []
    for prefetch in (True, False):
        model = LFPL(data.n_users, data.n_items, 4, seed=0)
        fit = fit_implicit(model, data, epochs=5, batch_size=128, seed=2, prefetch=prefetch)
        factors.append((model.U.detach().clone(), model.V.detach().clone(), fit.train_loss))
    (u_two, v_two, loss_two), (u_one, v_one, loss_one) = factors
    assert torch.equal(u_two, u_one) and torch.equal(v_two, v_one) and loss_two == loss_one


def test_fit_implicit_bad_arguments():
    data = implicit_synthetic()
    with pytest.raises(ValueError, match="the data have 80 users and 100 items"):
        fit_implicit(LFPL(10, 100, 2), data)
    with pytest.raises(ValueError, match="optimizer"):
        fit_implicit(LFPL(80, 100, 2), data, optimizer="sgd")


def test_kendall_tau():
    scores = torch.tensor([[3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 2.0, 3.0], [1.0, 1.0, 0.0, 9.0]])
    tau = kendall_tau(scores, torch.tensor([4, 4, 3]))
    # Row 3: pairs (0,1) tie, (0,2) and (1,2) concordant -> 2/3.
    torch.testing.assert_close(tau, torch.tensor([1.0, -1.0, 2 / 3]))
    for short in (1, 0, -1):  # a negative length once gave a silent tau of 0
        with pytest.raises(ValueError, match=f"length at least 2, got {short}"):
            kendall_tau(scores, torch.tensor([4, short, 3]))
    with pytest.raises(ValueError, match="must not exceed the width 4 of scores, got 5"):
        kendall_tau(scores, torch.tensor([4, 5, 3]))
    with pytest.raises(TypeError, match="lengths must be integers"):
        kendall_tau(scores, torch.tensor([4.0, 4.0, 3.0]))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_implicit():
    data = implicit_synthetic().to("cuda")
    split = leave_one_out(data, seed=0)
    gen = torch.Generator(device="cuda").manual_seed(0)
    negatives = data.sample_negatives(data.users, gen)
    assert negatives.is_cuda and not data.contains(data.users, negatives).any()
    model = LFPL(data.n_users, data.n_items, 3, seed=1, device="cuda")
    fit_implicit(model, split.train, epochs=20, batch_size=256)
    result = evaluate(model, split)
    assert result.per_user["auc"].is_cuda and result.auc > 0.6
    assert evaluate(MostPopular(split.train), split).auc > 0.4
    assert evaluate(Random(data.n_items, device="cuda"), split).n_users == split.users.numel()


def test_complement_draws_are_exact_and_uniform():
    # User 0 saw all but items 3, 17 and 41 of 50: after zero rejection rounds every draw comes
    # from the binary search over the complement.
    free = {3, 17, 41}
    pairs = [(0, i) for i in range(50) if i not in free] + [(1, 0)]
    data = ImplicitFeedback(torch.tensor(pairs), 2, 50)
    gen = torch.Generator().manual_seed(0)
    draws = data.sample_negatives(torch.zeros(30000, dtype=torch.long), gen, max_rounds=0)
    counts = torch.bincount(draws, minlength=50)
    assert set(draws.unique().tolist()) == free
    assert all(abs(int(counts[i]) / 30000 - 1 / 3) < 0.015 for i in free)
    # User 1 saw only item 0: its draws are uniform over the other 49.
    draws = data.sample_negatives(torch.ones(49000, dtype=torch.long), gen, max_rounds=0)
    counts = torch.bincount(draws, minlength=50)
    assert counts[0] == 0 and counts[1:].min() > 800 and counts[1:].max() < 1200
