"""Tests of LFPL training: parameter recovery, the objective, determinism and early stopping."""

from __future__ import annotations

import pytest
import torch

from botorch_pref.lfpl.dyads import DyadRankings
from botorch_pref.lfpl.factor_model import LFPL
from botorch_pref.lfpl.simulation import cross_validate_lfpl, heldout_tau, sample_lfpl
from botorch_pref.lfpl.training import (
    fit_lfpl,
    inverse_occurrence_weights,
    lfpl_batch_objective,
)


@pytest.fixture(scope="module")
def synthetic():
    return sample_lfpl(n_rankings=400, length=8, n_rows=12, n_cols=12, dim=2, seed=0)


@pytest.mark.parametrize("method", ["alternating", "joint"])
def test_parameter_recovery(synthetic, method):
    rankings, truth = synthetic
    train, test = rankings.split(0.25, seed=0)
    model = LFPL(12, 12, 2, seed=1)
    result = fit_lfpl(model, train, method=method, epochs=150, batch_size=64, seed=0)
    tau = heldout_tau(model, test).mean().item()
    true_tau = heldout_tau(truth, test).mean().item()
    assert true_tau > 0.4
    assert tau >= 0.9 * true_tau
    # The fitted model is far better than an untrained one.
    untrained = LFPL(12, 12, 2, seed=1)
    untrained.mark_seen()
    assert heldout_tau(untrained, test).mean().item() < 0.5 * true_tau
    assert result.train_loss[-1] < result.train_loss[0]
    assert result.best_epoch >= 0 and len(result.val_loss) == result.epochs_run


def test_cross_validation_reports_true_tau(synthetic):
    rankings, truth = synthetic
    cv = cross_validate_lfpl(rankings, truth, dim=2, n_folds=3, epochs=60, method="joint", lr=0.03)
    assert len(cv.tau) == len(cv.true_tau) == len(cv.seconds) == 3
    assert cv.skipped == [0, 0, 0]
    assert 0.85 < cv.ratio < 1.1


def test_full_batch_objective_is_the_frobenius_objective():
    gen = torch.Generator().manual_seed(1)
    r = DyadRankings.from_lists(
        [[(0, 0), (1, 2), (0, 1)], [(1, 1), (0, 2)], [(0, 2), (1, 0), (1, 1), (0, 0)]],
        n_rows=3,  # row 2 never occurs: it is not penalised
        n_cols=3,
    )
    U = torch.randn(3, 2, generator=gen, dtype=torch.float64)
    V = torch.randn(3, 2, generator=gen, dtype=torch.float64)
    n, reg = len(r), 0.3
    row_w = inverse_occurrence_weights(r.rows[r.mask], 3, n, torch.float64)
    col_w = inverse_occurrence_weights(r.cols[r.mask], 3, n, torch.float64)
    got = lfpl_batch_objective(U, V, r.rows, r.cols, r.lengths, reg, row_w, col_w)
    model = LFPL.from_factors(U, V)
    want = model.nll(r) / n + reg / 2 * (U[:2].square().sum() + V.square().sum())
    torch.testing.assert_close(got, want)
    # Averaged over all single-ranking batches, the batch objective is unbiased too.
    singles = torch.stack(
        [
            lfpl_batch_objective(U, V, r[i].rows, r[i].cols, r[i].lengths, reg, row_w, col_w)
            for i in range(n)
        ]
    )
    torch.testing.assert_close(singles.mean(), want)


def test_fits_are_seeded(synthetic):
    rankings, _ = synthetic
    states = []
    for _ in range(2):
        model = LFPL(12, 12, 2, seed=3)
        fit_lfpl(model, rankings[:100], epochs=3, batch_size=16, seed=5, validation=None)
        states.append(model.U.detach().clone())
    torch.testing.assert_close(states[0], states[1])
    other = LFPL(12, 12, 2, seed=3)
    fit_lfpl(other, rankings[:100], epochs=3, batch_size=16, seed=6, validation=None)
    assert not torch.allclose(states[0], other.U)


def test_sparse_gradients_give_the_same_adagrad_fit(synthetic):
    rankings, _ = synthetic
    dense, sparse = LFPL(12, 12, 2, seed=0), LFPL(12, 12, 2, seed=0)
    for model, flag in ((dense, False), (sparse, True)):
        fit_lfpl(model, rankings[:80], epochs=3, batch_size=16, sparse=flag, validation=None)
    torch.testing.assert_close(dense.U, sparse.U, atol=1e-5, rtol=1e-4)
    joint = LFPL(12, 12, 2, seed=0)
    fit_lfpl(joint, rankings[:80], method="joint", epochs=2, sparse=True, validation=None)


def test_early_stopping_restores_the_best_epoch(synthetic):
    rankings, _ = synthetic
    train, val = rankings[:40], rankings[200:]
    model = LFPL(12, 12, 2, seed=0)
    # Few rankings, large steps, no penalty: the model overfits and validation turns up.
    result = fit_lfpl(
        model, train, validation=val, method="joint", lr=0.1, reg=0.0, epochs=300, patience=5
    )
    assert result.stopped_early and result.epochs_run < 300
    assert result.best_epoch == result.epochs_run - 1 - 5
    best = min(result.val_loss)
    assert result.val_loss[result.best_epoch] == best
    assert model.nll(val).item() / len(val) == pytest.approx(best, rel=1e-5)


def test_seen_ids_come_from_the_training_part():
    r = DyadRankings.from_lists([[(0, 0), (1, 1)]] * 5, n_rows=3, n_cols=3)
    model = LFPL(3, 3, 2, seed=0)
    fit_lfpl(model, r, epochs=2, validation=None)
    assert model.seen_rows.tolist() == [True, True, False]
    with pytest.raises(ValueError, match="not seen in training"):
        model.rank(torch.tensor([2, 0]), torch.tensor([0, 0]))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "newton"}, "method must be one of"),
        ({"lr": -1.0}, "lr must be positive"),
        ({"reg": -1.0}, "reg must be non-negative"),
        ({"epochs": 0}, "epochs must be at least 1"),
        ({"batch_size": 0}, "batch_size must be at least 1"),
    ],
)
def test_bad_arguments(kwargs, message):
    r = DyadRankings.from_lists([[(0, 0), (1, 1)]] * 4)
    with pytest.raises(ValueError, match=message):
        fit_lfpl(LFPL(2, 2, 1), r, **kwargs)


def test_size_mismatch():
    r = DyadRankings.from_lists([[(0, 0), (1, 1)]] * 4)
    with pytest.raises(ValueError, match="the rankings have 2 rows"):
        fit_lfpl(LFPL(3, 2, 1), r)


def test_diverging_training_is_reported():
    r = DyadRankings.from_lists([[(0, 0), (1, 1), (0, 1)], [(1, 0), (0, 0)]] * 4)
    model = LFPL(2, 2, 2, seed=0)
    with pytest.raises(ValueError, match="training loss became"):
        fit_lfpl(model, r, method="joint", lr=1e30, reg=1.0, epochs=20, validation=None)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fit(synthetic):
    rankings, _ = synthetic
    model = LFPL(12, 12, 2, seed=0, device="cuda")
    fit_lfpl(model, rankings.to("cuda"), epochs=5)
    assert model.U.is_cuda and model.seen_rows.is_cuda
    assert heldout_tau(model, rankings[:50]).is_cuda
