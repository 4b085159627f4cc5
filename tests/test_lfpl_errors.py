"""Every bad input of issue 17 gets a ValueError/TypeError naming the offending value."""

from __future__ import annotations

import math
import re

import pytest
import torch

from botorch_pref.cli import main
from botorch_pref.data import load_movielens
from botorch_pref.lfpl import (
    LFPL,
    DyadRankings,
    ImplicitFeedback,
    evaluate,
    fit_implicit,
    fit_lfpl,
    leave_one_out,
    plackett_luce_nll,
)


@pytest.fixture
def rankings():
    return DyadRankings.from_lists([[(0, 0), (1, 1)], [(1, 0), (0, 1)], [(0, 1), (1, 0)]] * 3)


@pytest.fixture
def split():
    pairs = [(u, i) for u in range(6) for i in range(u % 3, 8, 2)]
    return leave_one_out(ImplicitFeedback(torch.tensor(pairs)), seed=0)


@pytest.mark.parametrize(
    ("validation", "error", "message"),
    [
        (0, ValueError, r"validation as a fraction must lie in \(0, 1\), got 0"),
        (1.5, ValueError, "got 1.5"),
        ("0.1", TypeError, "got str"),
    ],
)
def test_fit_lfpl_validation_argument(rankings, validation, error, message):
    with pytest.raises(error, match=message):
        fit_lfpl(LFPL(2, 2, 1), rankings, validation=validation, epochs=1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_delta": math.nan}, "min_delta must be non-negative and finite, got nan"),
        ({"lr": math.inf}, "lr must be positive and finite, got inf"),
        ({"reg": math.nan}, "reg must be non-negative and finite, got nan"),
    ],
)
def test_fit_lfpl_non_finite_settings(rankings, kwargs, message):
    with pytest.raises(ValueError, match=message):
        fit_lfpl(LFPL(2, 2, 1), rankings, epochs=1, **kwargs)


def test_fit_lfpl_integer_settings(rankings):
    with pytest.raises(TypeError, match=r"epochs must be an integer, got 2\.5"):
        fit_lfpl(LFPL(2, 2, 1), rankings, epochs=2.5)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"batch_size": 0}, ValueError, "batch_size must be at least 1, got 0"),
        ({"k": 0}, ValueError, "k must be at least 1, got 0"),
        ({"k": 2.0}, TypeError, "k must be an integer, got 2.0"),
    ],
)
def test_evaluate_bad_arguments(split, kwargs, error, message):
    model = LFPL(split.train.n_users, split.train.n_items, 2, seed=0)
    model.mark_seen()
    with pytest.raises(error, match=message):
        evaluate(model, split, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"min_delta": math.nan}, ValueError, "min_delta must be non-negative and finite"),
        ({"n_negatives": 0}, ValueError, "n_negatives must be at least 1, got 0"),
        ({"negatives": "popular"}, ValueError, "negatives must be one of"),
        ({"lr_schedule": "cosine"}, ValueError, "lr_schedule must be one of"),
        ({"candidates": 2, "negatives": "hard"}, ValueError, "candidates must be at least 5"),
        ({"threads": 0}, ValueError, "threads must be at least 1, got 0"),
        ({"threads": "two"}, TypeError, "threads must be 'auto', None or an int"),
    ],
)
def test_fit_implicit_bad_arguments(split, kwargs, error, message):
    model = LFPL(split.train.n_users, split.train.n_items, 2, seed=0)
    with pytest.raises(error, match=message):
        fit_implicit(model, split.train, epochs=1, **kwargs)


@pytest.mark.parametrize("scale", [math.nan, math.inf, -1.0])
def test_lfpl_init_scale_must_be_finite(scale):
    message = f"init_scale must be finite and non-negative, got {scale}"
    with pytest.raises(ValueError, match=re.escape(message)):
        LFPL(2, 2, 1, init_scale=scale)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_from_factors_rejects_non_finite_factors(bad):
    U = torch.zeros(3, 2)
    U[1, 0] = bad
    with pytest.raises(ValueError, match=rf"U\[1, 0\] is {bad}: factors must be finite"):
        LFPL.from_factors(U, torch.zeros(2, 2))
    with pytest.raises(TypeError, match="V must be a floating tensor"):
        LFPL.from_factors(torch.zeros(3, 2), torch.zeros(2, 2, dtype=torch.long))


def test_dyad_rankings_reject_fractional_ids():
    with pytest.raises(ValueError, match=r"ranking 0, position 1: ids must be integers, got 1.5"):
        DyadRankings.from_lists([[(0, 0), (1.5, 1)]])
    with pytest.raises(ValueError, match="got True"):
        DyadRankings.from_lists([[(0, 0), (True, 1)]])


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_plackett_luce_nll_rejects_non_finite_scores_and_weights(bad):
    scores = torch.tensor([[0.0, 1.0, 2.0], [0.5, bad, 0.0]])
    with pytest.raises(ValueError, match=rf"scores\[1, 1\] is {bad}: must be finite"):
        plackett_luce_nll(scores)
    # Padding may hold anything.
    assert torch.isfinite(plackett_luce_nll(scores, lengths=torch.tensor([3, 1])))
    weights = torch.tensor([1.0, bad])
    with pytest.raises(ValueError, match=rf"weights\[1\] is {bad}"):
        plackett_luce_nll(torch.zeros(2, 3), weights=weights)


def test_plackett_luce_nll_mean_needs_a_denominator():
    with pytest.raises(ValueError, match="there are no rankings"):
        plackett_luce_nll(torch.zeros(0, 3), reduction="mean")
    with pytest.raises(ValueError, match="the weights sum to zero"):
        plackett_luce_nll(torch.zeros(2, 3), weights=torch.zeros(2), reduction="mean")


def test_plackett_luce_nll_rejects_fractional_lengths():
    with pytest.raises(ValueError, match=r"lengths must be integers, got dtype torch\.float32"):
        plackett_luce_nll(torch.zeros(2, 3), lengths=torch.tensor([2.5, 3.0]))
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 3\].*got 4"):
        plackett_luce_nll(torch.zeros(2, 3), lengths=torch.tensor([2, 4]))


def test_implicit_feedback_rejects_non_finite_timestamps():
    pairs = torch.tensor([[0, 1], [1, 0]])
    with pytest.raises(ValueError, match="interaction 1: timestamp nan is not finite"):
        ImplicitFeedback(pairs, timestamps=torch.tensor([1.0, math.nan]))
    with pytest.raises(ValueError, match=r"pairs must be integers, got 1\.5"):
        ImplicitFeedback(torch.tensor([[0.0, 1.5]]))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("2\t7\t4\tnan", "interaction 1 has the timestamp nan"),
        ("2\t7\t4\t1e30", "interaction 1 has the timestamp 1e[+]?30"),
        ("2\t7\t4\t12.5", "interaction 1 has the timestamp 12.5"),
        (" \t7\t4\t5", "interaction 1 has a blank user id"),
        ("2\t7\tnan\t5", "interaction 1 has the rating nan"),
    ],
)
def test_load_movielens_rejects_bad_values(tmp_path, line, message):
    path = tmp_path / "u.data"
    path.write_text("1\t5\t3\t881250949\n" + line + "\n")
    with pytest.raises(ValueError, match=message):
        load_movielens(path)


def test_cli_errors_are_one_line_and_non_zero(tmp_path, capsys):
    cases = [
        (["lfpl", "synthetic", "--device", "bogus"], "--device 'bogus' is not a torch device"),
        (["lfpl", "synthetic", "--dim", "0", "--folds", "2"], "dim must be a positive integer"),
        (["lfpl", "recommend", "--model", str(tmp_path / "none.pt"), "--users", "1"], "no such"),
    ]
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a model")
    cases.append((["lfpl", "recommend", "--model", str(bad), "--users", "1"], "not a saved"))
    for argv, message in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err
        assert err.count("\n") == 1 and "Traceback" not in err


def test_from_factors_rejects_mixed_dtypes():
    with pytest.raises(ValueError, match="U and V must share dtype and device"):
        LFPL.from_factors(torch.zeros(3, 2, dtype=torch.float64), torch.zeros(2, 2))


def test_dyad_rankings_reject_fractional_lengths_and_boolean_ids():
    rows, cols = torch.tensor([[0, 1, 2]]), torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match=r"lengths must be integers, got dtype torch\.float32"):
        DyadRankings(rows, cols, torch.tensor([2.9]))
    with pytest.raises(ValueError, match=r"ids must be integers, got dtypes torch\.bool"):
        DyadRankings(torch.tensor([[True, False]]), torch.zeros(1, 2, dtype=torch.long))


def test_sample_lfpl_rejects_empty_or_negative_sizes():
    from botorch_pref.lfpl import sample_lfpl

    for n_rows, n_cols in ((0, 5), (-3, -3)):
        with pytest.raises(ValueError, match="n_rankings, n_rows and n_cols must be positive"):
            sample_lfpl(10, 2, n_rows, n_cols, 2)
