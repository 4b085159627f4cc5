"""Graded comparisons and ratings in the one answer type: validation, and encoding into data.

Each bad answer raises :class:`InvalidAnswerError` naming the value; a valid one encodes into
the ``GRADED`` / ``RATING`` rows of :class:`PreferenceData` at the levels the module docstring
of :mod:`botorch_pref.loop.answers` states.
"""

from __future__ import annotations

import pytest
import torch

from botorch_pref.data.preferences import PreferenceData
from botorch_pref.likelihoods import ObservationKind
from botorch_pref.loop.answers import (
    Answer,
    AnswerFormat,
    InvalidAnswerError,
    encode_answer,
    validate_answer,
)

GRADED5 = {"levels": 5}
RATED3 = {"rating_levels": 3}

#: ``(q, answer, message fragment)`` of bad answers.
BAD = [
    (2, {"winner": 0, "strength": 3, **GRADED5}, "got 3"),
    (2, {"winner": 0, "strength": 0, **GRADED5}, "got 0"),
    (2, {"winner": 0, "strength": -1, **GRADED5}, "got -1"),
    (2, {"winner": 0, "strength": 1.0, **GRADED5}, "1.0"),
    (2, {"winner": 0, "strength": 1.5, **GRADED5}, "1.5"),
    (2, {"winner": 0, "strength": "1", **GRADED5}, "'1'"),
    (2, {"winner": 0, "strength": True, **GRADED5}, "True"),
    (2, {"winner": 0, "strength": 1}, "binary"),
    (2, {"tie": True, "strength": 1, **GRADED5}, "a tie"),
    (2, {"skip": True, "strength": 1, **GRADED5}, "a skip"),
    (2, {"strength": 1, **GRADED5}, "strength=1"),
    (3, {"winner": 0, "strength": 1, **GRADED5}, "not an answer about 3"),
    (2, {"winner": 0, "strength": 3, "levels": 4}, "1..2"),
    (2, {"tie": True, "levels": 4}, "4-level"),
    (2, {"ratings": [1], **RATED3}, "got 1: [1]"),
    (2, {"winner": 0, "ratings": [0, 1, 2], **RATED3}, "got 3"),
    (2, {"ratings": [0, 3], **RATED3}, "got 3 in [0, 3]"),
    (2, {"ratings": [-1, 0], **RATED3}, "got -1"),
    (2, {"ratings": [0, 1.0], **RATED3}, "1.0"),
    (2, {"ratings": "01", **RATED3}, "'01'"),
    (2, {"ratings": 1, **RATED3}, "got 1"),
    (2, {"winner": 0, "ratings": [0, 1]}, "[0, 1]"),
    (2, {"skip": True, "ratings": [0, 1], **RATED3}, "skipped"),
]


@pytest.mark.parametrize(("q", "kwargs", "fragment"), BAD)
def test_a_bad_graded_answer_or_rating_raises_naming_the_value(q, kwargs, fragment):
    with pytest.raises(InvalidAnswerError) as err:
        validate_answer(q, **kwargs)
    assert fragment in str(err.value)


@pytest.mark.parametrize("levels", [1, 0, 2.5, "5", True])
def test_a_bad_scale_is_a_value_error(levels):
    with pytest.raises(ValueError, match="levels"):
        validate_answer(2, 0, levels=levels)
    with pytest.raises(ValueError, match="levels"):
        AnswerFormat("pairs", levels=levels)
    with pytest.raises(ValueError, match="ratings"):
        AnswerFormat("pairs", ratings=levels)


def test_valid_answers_carry_strength_and_ratings():
    assert validate_answer(2, 1, strength=2, **GRADED5) == Answer("winner", 1, strength=2)
    assert validate_answer(2, tie=True, **GRADED5) == Answer("tie")
    assert validate_answer(2, 0, **GRADED5) == Answer("winner", 0)  # strength unknown
    got = validate_answer(3, ratings=torch.tensor([2, 0, 1]), **RATED3)
    assert got == Answer("rating", ratings=(2, 0, 1))
    got = validate_answer(3, ranking=[2, 0, 1], ratings=(0, 0, 2), **RATED3)
    assert got == Answer("ranking", 2, (2, 0, 1), ratings=(0, 0, 2))
    got = validate_answer(2, tie=True, ratings=[1, 1], **GRADED5, **RATED3)
    assert got == Answer("tie", ratings=(1, 1))


@pytest.mark.parametrize(
    ("levels", "winner", "strength", "row", "level"),
    [
        (5, 0, 1, [10, 20], 3),
        (5, 0, 2, [10, 20], 4),
        (5, 1, 1, [20, 10], 3),
        (5, 1, 2, [20, 10], 4),
        (3, 1, 1, [20, 10], 2),
        (7, 0, 3, [10, 20], 6),
        (4, 0, 1, [10, 20], 2),
        (4, 1, 2, [20, 10], 3),
        (2, 0, 1, [10, 20], 1),
    ],
)
def test_a_graded_answer_is_the_graded_row_winner_first(levels, winner, strength, row, level):
    answer = validate_answer(2, winner, strength=strength, levels=levels)
    data = encode_answer([10, 20], answer, AnswerFormat("pairs", levels))
    expected = PreferenceData().add_graded(row[0], row[1], level, levels=levels)
    assert data == expected


@pytest.mark.parametrize("levels", [3, 5, 7])
def test_a_tie_on_an_odd_scale_is_its_middle_level(levels):
    data = encode_answer(
        [4, 2], validate_answer(2, tie=True, levels=levels), AnswerFormat(levels=levels)
    )
    assert data.kind.tolist() == [ObservationKind.GRADED]
    assert data.level.tolist() == [(levels - 1) // 2]
    assert data.options.tolist() == [[4, 2]]


def test_ratings_follow_the_comparison_one_row_per_option():
    form = AnswerFormat("pairs", levels=5, ratings=3)
    answer = validate_answer(2, 1, strength=1, ratings=[0, 2], levels=5, rating_levels=3)
    data = encode_answer([7, 3], answer, form)
    expected = PreferenceData().add_graded(3, 7, 3, levels=5)
    expected.add_rating(7, 0, levels=3).add_rating(3, 2)
    assert data == expected
    alone = encode_answer([7, 3], validate_answer(2, ratings=[1, 1], rating_levels=3), form)
    assert alone == PreferenceData().add_rating(7, 1, levels=3).add_rating(3, 1)


def test_binary_answers_encode_as_before():
    form = AnswerFormat("pairs")
    assert encode_answer([1, 0], Answer("winner", 1), form) == PreferenceData().add_comparison(0, 1)
    assert encode_answer([1, 0], Answer("tie"), "pairs") == PreferenceData().add_tie(1, 0)
    rank = Answer("ranking", 2, (2, 0, 1))
    assert encode_answer([5, 6, 7], rank, "choice") == PreferenceData().add_ranking(
        [5, 6, 7], [7, 5, 6]
    )
    with pytest.raises(ValueError, match="mode"):
        encode_answer([0, 1], Answer("winner", 0), "both")
