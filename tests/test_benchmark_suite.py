"""The question-quality suite's problem names (``benchmarks/suite.py``)."""

from __future__ import annotations

from benchmarks import suite
from botorch_pref.test_functions import get_utility


def test_named_groups_expand_in_order_without_repeats():
    assert suite.expand_problems(None) == list(suite.SUITE)
    assert suite.expand_problems(["Holdout", "branin", "hartmann3"]) == [
        *suite.HOLDOUT,
        "branin",
    ]
    assert suite.expand_problems(["levy4", "suite"])[:2] == ["levy4", "hartmann6"]


def test_holdout_problems_exist_and_lie_outside_the_suite():
    assert not set(suite.HOLDOUT) & set(suite.SUITE)
    for name in (*suite.SUITE, *suite.HOLDOUT):
        assert get_utility(get_utility(name).name).name == get_utility(name).name
