"""Simulated users that answer on a graded scale and rate designs."""

from __future__ import annotations

import pytest
import torch

from botorch_pref.graded_users import GradedUser, calibrate_grades, calibrate_ratings
from botorch_pref.test_functions import get_utility
from botorch_pref.users import SimulatedUser

BRANIN = get_utility("branin")
PAIRS = torch.rand(4000, 2, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))


def _user(seed=3, grade_noise=1.0, scale=None):
    thresholds = calibrate_grades(BRANIN, 5, n_pairs=20_000)
    cuts = calibrate_ratings(BRANIN, 4, n_designs=20_000)
    scale = 0.1 if scale is None else scale
    return GradedUser(
        BRANIN,
        grade_thresholds=thresholds,
        rating_cut_points=cuts,
        grade_noise=grade_noise,
        noise="gumbel",
        scale=scale,
        seed=seed,
    )


def test_calibration_puts_levels_at_equal_frequencies_on_random_designs():
    user = _user(scale=0.0)
    assert user.graded_levels == 5
    freq = torch.bincount(user.grade(PAIRS), minlength=5).double() / len(PAIRS)
    # strengths 0, 1, 2 a third each, split evenly between the two directions
    torch.testing.assert_close(freq[2], torch.tensor(1 / 3, dtype=torch.float64), atol=0.03, rtol=0)
    torch.testing.assert_close(
        freq[[0, 1, 3, 4]], torch.full((4,), 1 / 6, dtype=torch.float64), atol=0.03, rtol=0
    )
    rated = torch.bincount(user.rate(PAIRS[:, 0]), minlength=4).double() / len(PAIRS)
    torch.testing.assert_close(
        rated, torch.full((4,), 0.25, dtype=torch.float64), atol=0.03, rtol=0
    )


def test_a_graded_answer_takes_the_binary_users_side_answer_for_answer():
    graded, binary = _user(seed=5), SimulatedUser(BRANIN, "gumbel", 0.1, seed=5)
    for batch in (PAIRS[:2000], PAIRS[2000:]):  # the streams stay together across calls
        level, chosen = graded.grade(batch), binary.choose(batch)
        sided = level != 2
        assert bool(((level > 2) == (chosen == 0))[sided].all())
        graded.rate(batch[:, 1])  # ratings draw from the other generator


def test_noisier_grades_keep_the_direction_and_blur_the_strength():
    # a scale comparable with the gaps of random pairs (Branin's range is about 300)
    clean, noisy = _user(seed=7, scale=10.0), _user(seed=7, grade_noise=4.0, scale=10.0)
    exact = _user(seed=7, scale=0.0).grade(PAIRS)
    a, b = clean.grade(PAIRS), noisy.grade(PAIRS)
    sided = (a != 2) & (b != 2)
    assert bool(((a > 2) == (b > 2))[sided].all())
    # strengths agree with the noiseless user's less often when the grades are noisier
    assert (b == exact).double().mean() < (a == exact).double().mean() - 0.05


def test_answers_are_seeded():
    assert torch.equal(_user(seed=1).grade(PAIRS[:50]), _user(seed=1).grade(PAIRS[:50]))
    assert torch.equal(_user(seed=1).rate(PAIRS[:50, 0]), _user(seed=1).rate(PAIRS[:50, 0]))
    one, two = _user(seed=1, scale=10.0), _user(seed=2, scale=10.0)
    assert not torch.equal(one.grade(PAIRS[:200]), two.grade(PAIRS[:200]))


def test_calibrated_user_has_thresholds_and_cut_points():
    user = GradedUser.calibrated(
        BRANIN, graded_levels=7, rating_levels=3, seed=0, n_candidates=10_000
    )
    assert user.graded_levels == 7 and len(user.rating_cut_points) == 2
    assert int(user.grade(PAIRS[:100]).max()) <= 6


def test_bad_graded_settings_raise():
    with pytest.raises(ValueError, match="no grade_thresholds"):
        GradedUser(BRANIN, scale=0.1).grade(PAIRS[:3])
    with pytest.raises(ValueError, match="no rating_cut_points"):
        GradedUser(BRANIN, scale=0.1).rate(PAIRS[:3, 0])
    with pytest.raises(ValueError, match="graded answers are to pairs"):
        _user().grade(torch.rand(3, 3, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="grade_noise must be at least 1"):
        _user(grade_noise=0.5)
    with pytest.raises(ValueError, match=r"grade_thresholds must be positive.*\[0.5, 0.25\]"):
        GradedUser(BRANIN, grade_thresholds=torch.tensor([0.5, 0.25]))
    with pytest.raises(ValueError, match="levels must be odd"):
        calibrate_grades(BRANIN, 4, n_pairs=100)
