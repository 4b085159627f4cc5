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


def _cell(curves: dict[int, list[float]]) -> dict:
    return {"seeds": list(curves), "log_regret": list(curves.values())}


def test_answers_to_match_is_the_first_query_whose_mean_reaches_the_anchors():
    ours = _cell({0: [0.0, -1.0, -1.5, -3.0], 1: [0.0, 0.0, -0.5, -1.0], 5: [9.0, 9.0, 9.0, 9.0]})
    anchor = _cell({0: [0.0, -0.5, -1.0], 1: [0.0, 0.0, 0.0], 2: [-9.0, -9.0, -9.0]})
    # Shared seeds 0 and 1: the anchor's mean after 2 queries is -0.5; ours' means are 0, -0.5.
    assert suite.answers_to_match(ours, anchor, 2) == 1
    assert suite.answers_to_match(ours, anchor, 1) == 1  # target -0.25
    # A target ours never reaches within its curves, and no shared seed.
    assert suite.answers_to_match(ours, _cell({0: [0.0, -5.0], 1: [0.0, -5.0]}), 1) is None
    assert suite.answers_to_match(ours, _cell({7: [0.0, -1.0]}), 1) is None


def test_the_table_reports_the_answers_to_match():
    ours = _cell({0: [0.0, -1.0, -2.0], 1: [0.0, -1.0, -2.0]}) | {"seconds_per_query": 0.1}
    anchor = _cell({0: [0.0, -0.5, -1.0], 1: [0.0, -0.5, -1.0]}) | {"seconds_per_query": 1.0}
    text = suite.table({"branin": {"eubo": {"ours": ours, "anchor": anchor}}}, 2)
    header, _, row = text.splitlines()
    column = header.split(" | ").index("ours matches BoTorch @2 after")
    assert row.split(" | ")[column] == "1"
    slow = _cell({0: [0.0, 0.0, 0.0], 1: [0.0, 0.0, 0.0]}) | {"seconds_per_query": 0.1}
    row = suite.table({"branin": {"eubo": {"ours": slow, "anchor": anchor}}}, 2).splitlines()[2]
    assert row.split(" | ")[column] == "> 2"
    elsewhere = _cell({3: [0.0, -0.5, -1.0]}) | {"seconds_per_query": 1.0}
    row = suite.table({"branin": {"eubo": {"ours": ours, "anchor": elsewhere}}}, 2).splitlines()[2]
    assert row.split(" | ")[column] == "-"
