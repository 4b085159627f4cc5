"""PreferenceData with graded comparisons and ratings: encoding, joining, checks, round trips."""

from __future__ import annotations

import json

import pytest
import torch

from botorch_pref.data import PreferenceData, PreferenceDataError
from botorch_pref.likelihoods import ObservationKind

GRADED, RATING, PAIR, TIE = (
    int(ObservationKind.GRADED),
    int(ObservationKind.RATING),
    int(ObservationKind.PAIR),
    int(ObservationKind.TIE),
)


def _mixed() -> PreferenceData:
    data = PreferenceData.from_comparisons(torch.tensor([[0, 1]]))
    data.add_graded(2, 0, 4, levels=5).add_rating(1, 0, levels=3).add_tie(0, 2)
    data.add_choice([0, 1, 2], chosen=1)
    return data


def test_graded_and_rating_rows_are_encoded_with_their_levels():
    data = _mixed()
    assert data.kind.tolist() == [PAIR, GRADED, RATING, TIE, int(ObservationKind.CHOICE)]
    assert data.level.tolist() == [-1, 4, 0, -1, -1]
    assert data.n_stages.tolist() == [1, 0, 0, 0, 1]
    assert data.options[1].tolist() == [2, 0, -1] and data.options[2].tolist() == [1, -1, -1]
    assert (data.graded_levels, data.rating_levels) == (5, 3)
    assert not data.is_pairwise


def test_levels_are_carried_through_joining_and_reshaping():
    data = _mixed()
    assert PreferenceData.cat([data, PreferenceData()]) == data
    joined = data + PreferenceData(graded_levels=5).add_graded(0, 1, 2)
    assert joined.level.tolist()[-1] == 2 and joined.graded_levels == 5
    shifted = data.shift(3)
    assert shifted.level.tolist() == data.level.tolist()
    assert shifted.options[2].tolist() == [4, -1, -1]  # padding stays -1
    batched = data.expand(2, 3)
    assert batched.level.shape == (2, 3, 5) and batched.rating_levels == 3
    assert batched.reshape(-1).level.shape == (6, 5)
    assert batched.reshape(-1) == data.expand(6)
    assert data.to("cpu") == data and data.to(torch.float32) is data
    copy = PreferenceData.from_checked(
        data.options, data.kind, data.n_stages, data.level, graded_levels=5, rating_levels=3
    )
    assert copy == data
    assert copy != PreferenceData.from_checked(data.options, data.kind, data.n_stages, data.level)
    assert data.extend(PreferenceData(rating_levels=3).add_rating(0, 2)).level.tolist()[-1] == 2


def test_json_round_trip_keeps_every_answer():
    data = _mixed()
    again = PreferenceData.from_dict(json.loads(json.dumps(data.to_dict())))
    assert again == data
    assert PreferenceData.from_dict(PreferenceData().to_dict()) == PreferenceData()
    # records of data without levels (no "level" key) still read
    record = PreferenceData.from_comparisons(torch.tensor([[1, 0]])).to_dict()
    del record["level"], record["graded_levels"], record["rating_levels"]
    assert PreferenceData.from_dict(record).kind.tolist() == [PAIR]
    with pytest.raises(PreferenceDataError, match="not a PreferenceData record"):
        PreferenceData.from_dict({"options": [[0, 1]]})


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda d: d.add_graded(0, 1, 5, levels=5), r"level must lie in \[0, 4\].*got 5"),
        (lambda d: d.add_graded(0, 1, -1, levels=5), r"got -1"),
        (lambda d: d.add_graded(0, 1, 1.5, levels=5), "level must be an integer, got 1.5"),
        (lambda d: d.add_graded(0, 1, True, levels=5), "level must be an integer"),
        (lambda d: d.add_graded(0, 1, 2), "no graded_levels"),
        (lambda d: d.add_graded(0, 0, 2, levels=5), "more than once"),
        (lambda d: d.add_graded(0, 1, 2, levels=1), "levels must be an integer >= 2"),
        (lambda d: d.add_rating(0, 3, levels=3), r"rating level must lie in \[0, 2\].*got 3"),
        (lambda d: d.add_rating(0, 1), "no rating_levels"),
        (lambda d: d.add_rating(-1, 1, levels=3), "non-negative"),
    ],
)
def test_bad_answers_raise_naming_the_value_and_leave_the_data_unchanged(build, match):
    data = PreferenceData.from_comparisons(torch.tensor([[0, 1]]))
    before = data.to_dict()
    with pytest.raises(PreferenceDataError, match=match):
        build(data)
    assert data.to_dict() == before


def test_the_scale_is_set_once():
    data = PreferenceData().add_graded(0, 1, 2, levels=5)
    data.add_graded(1, 2, 0)  # the data's scale
    with pytest.raises(PreferenceDataError, match="levels=7 differs from the data's graded"):
        data.add_graded(1, 2, 0, levels=7)
    with pytest.raises(PreferenceDataError, match="cannot join data of different graded"):
        PreferenceData.cat([data, PreferenceData(graded_levels=3)])
    assert data.graded_levels == 5 and len(data) == 2


def test_tensor_level_checks():
    opts = torch.tensor([[0, 1], [2, -1]])
    kind = torch.tensor([GRADED, RATING])
    ok = PreferenceData(opts, kind, level=torch.tensor([1, 2]), graded_levels=3, rating_levels=3)
    assert ok.level.tolist() == [1, 2]
    with pytest.raises(PreferenceDataError, match="only graded comparisons and ratings take"):
        PreferenceData(torch.tensor([[0, 1]]), level=torch.tensor([0]))
    with pytest.raises(PreferenceDataError, match="exactly one option"):
        PreferenceData(
            torch.tensor([[0, 1]]), torch.tensor([RATING]), level=torch.tensor([0]), rating_levels=2
        )
    with pytest.raises(PreferenceDataError, match="level must hold integer levels"):
        PreferenceData(opts, kind, level=torch.tensor([0.5, 1.0]), graded_levels=3, rating_levels=3)
    with pytest.raises(PreferenceDataError, match="level must have shape"):
        PreferenceData(opts, kind, level=torch.tensor([0]), graded_levels=3, rating_levels=3)
    with pytest.raises(PreferenceDataError, match=r"graded comparison level .* got 3"):
        PreferenceData(opts, kind, level=torch.tensor([3, 0]), graded_levels=3, rating_levels=3)
