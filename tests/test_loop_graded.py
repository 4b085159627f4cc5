"""Graded answers and ratings in the loop: settings, tell, the data, replay, replications.

A graded run (``answers="graded", levels=k``) records a pair's winner and strength as the
graded row the module docstring of :mod:`botorch_pref.loop.answers` states, ratings as rating
rows, and fits the model on everything answered; a bad answer leaves the optimiser unchanged.
"""

from __future__ import annotations

import pytest
import torch

from botorch_pref.likelihoods import ObservationKind
from botorch_pref.loop import InvalidAnswerError, LoopConfig, PreferenceOptimizer, run_replications
from botorch_pref.loop.answers import AnswerFormat
from botorch_pref.test_functions import get_utility

BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
#: A small budget: two random queries, then cheap acquisition queries.
FAST = {"n_initial": 2, "num_restarts": 2, "raw_samples": 16, "seed": 0}
KINDS = ObservationKind


def _opt(**settings) -> PreferenceOptimizer:
    return PreferenceOptimizer(BOUNDS, **{**FAST, **settings})


@pytest.mark.parametrize(
    ("settings", "form", "ties"),
    [
        ({"answers": "graded"}, AnswerFormat("pairs", 5), True),
        ({"answers": "graded", "levels": 4}, AnswerFormat("pairs", 4), False),
        ({"levels": 7}, AnswerFormat("pairs", 7), True),
        ({"ratings": 3}, AnswerFormat("pairs", None, 3), False),
        ({"ratings": 3, "ties": True}, AnswerFormat("pairs", None, 3), True),
        ({"answers": AnswerFormat("pairs", 3, 5)}, AnswerFormat("pairs", 3, 5), True),
        ({}, AnswerFormat("pairs"), False),
    ],
)
def test_the_answer_format_is_one_field_built_from_the_keywords(settings, form, ties):
    opt = _opt(**settings)
    assert (opt.config.answers, opt.config.ties) == (form, ties)
    untied_or_graded = (form.binary and not ties) or (form.graded and form.ratings is None)
    assert opt.config.model.inference == ("ep" if untied_or_graded else "laplace")
    again = PreferenceOptimizer(BOUNDS, **opt.settings)
    assert again.config == opt.config
    assert len(LoopConfig.__dataclass_fields__) <= 12


def test_graded_answers_take_ep_when_asked():
    opt = _opt(answers="graded", ratings=3, inference="ep")
    assert opt.config.model.inference == "ep"
    opt.tell(opt.ask(), winner=0, strength=2, ratings=[2, 0])
    opt.tell(opt.ask(), tie=True)
    assert opt.model.inference == "ep"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"answers": "graded", "levels": 4, "ties": True}, "middle level"),
        ({"answers": "graded", "q": 3, "strategy": "qeubo"}, "q = 2, not 3"),
        ({"answers": "choice", "ratings": 3}, "choices"),
        ({"answers": "graded", "levels": 1}, "levels"),
        ({"ratings": 2.5}, "ratings"),
        ({"answers": "choice", "q": 3, "strategy": "qeubo", "inference": "ep"}, "inference='ep'"),
        ({"ratings": 3, "model": "pairwisegp"}, "pairwisegp"),
        ({"answers": "several"}, "answers must be one of"),
        ({"answers": AnswerFormat("pairs", 5), "levels": 5}, "AnswerFormat"),
    ],
)
def test_bad_answer_settings_raise(settings, message):
    with pytest.raises(ValueError, match=message):
        _opt(**settings)


def test_tell_records_strength_and_ratings_as_graded_and_rating_rows():
    opt = _opt(answers="graded", levels=5, ratings=3)
    X = opt.ask()
    opt.tell(X, winner=1, strength=2, ratings=[0, 2])
    opt.tell(opt.ask(), tie=True)
    opt.tell(opt.ask(), ratings=[1, 1])
    opt.tell(opt.ask(), winner=0)  # no strength: a plain comparison
    data = opt.preference_data
    G, R, P = KINDS.GRADED, KINDS.RATING, KINDS.PAIR
    assert data.kind.tolist() == [G, R, R, G, R, R, P]
    assert data.options[:, 0].tolist() == [1, 0, 1, 2, 4, 5, 6]
    assert data.options[[0, 3, 6], 1].tolist() == [0, 3, 7]
    # B (datapoint 1) much better: level 4 of 5 with B first; a tie: the middle level 2
    assert data.level.tolist() == [4, 0, 2, 2, 1, 1, -1]
    assert (data.graded_levels, data.rating_levels) == (5, 3)
    history = opt.history
    assert (history[0].winner, history[0].strength, history[0].ratings) == (1, 2, (0, 2))
    assert history[1].tie and history[2].winner is None and history[2].ratings == (1, 1)
    likelihood = opt.model.likelihood
    assert (likelihood.graded_levels, likelihood.rating_levels) == (5, 3)
    with pytest.raises(ValueError, match="graded comparisons or ratings"):
        _ = opt.comparisons


@pytest.mark.parametrize(
    ("answer", "fragment"),
    [
        ({"winner": 0, "strength": 3}, "got 3"),
        ({"winner": 0, "strength": 0}, "got 0"),
        ({"winner": 0, "strength": 1.5}, "1.5"),
        ({"tie": True, "strength": 1}, "a tie"),
        ({"winner": 0, "ratings": [1]}, "got 1: [1]"),
        ({"winner": 0, "ratings": [0, 3]}, "got 3"),
    ],
)
def test_a_bad_graded_answer_leaves_the_optimizer_unchanged(answer, fragment):
    opt = _opt(answers="graded", levels=5, ratings=3)
    opt.tell(opt.ask(), winner=0, strength=1)
    X = opt.ask()
    before = (opt.n_queries, opt.preference_data, opt.n_refits)
    with pytest.raises(InvalidAnswerError) as err:
        opt.tell(X, **answer)
    assert fragment in str(err.value)
    assert (opt.n_queries, opt.preference_data, opt.n_refits) == before
    assert torch.equal(opt.ask(), X)  # the query still awaits its answer


def test_strength_and_ratings_need_their_scales():
    opt = _opt()
    X = opt.ask()
    with pytest.raises(InvalidAnswerError, match="binary"):
        opt.tell(X, winner=0, strength=1)
    with pytest.raises(InvalidAnswerError, match="no ratings"):
        opt.tell(X, winner=0, ratings=[0, 1])
    assert opt.n_queries == 0


def test_a_graded_run_replays_to_its_next_query():
    f = get_utility("branin")
    opt = _opt(answers="graded", levels=5, ratings=3, refit_all_until=3, refit_every=2)
    for _ in range(5):
        X = opt.ask()
        u = f(X)
        w = int(u[1] > u[0])
        strength = 1 + int(abs(float(u[0] - u[1])) > 20.0)
        opt.tell(X, winner=w, strength=strength, ratings=[int(v > -30) + int(v > -5) for v in u])
    again = PreferenceOptimizer.replay(opt.history, BOUNDS, **opt.settings)
    assert again.preference_data == opt.preference_data
    assert torch.equal(again.ask(), opt.ask())
    # records as tuples (query, winner, ranking, tie, strength, ratings) too
    tuples = [tuple(r) for r in opt.history]
    assert PreferenceOptimizer.replay(tuples, BOUNDS, **opt.settings).preference_data == (
        opt.preference_data
    )


def test_replications_with_graded_users_share_the_binary_users_directions():
    common = {"n_replications": 2, "n_queries": 1, "seed": 3, "n_initial": 4, "scale": 0.1}
    common.update(num_restarts=2, raw_samples=16, backend="sequential")
    binary = run_replications("branin", **common)
    graded = run_replications("branin", answers="graded", levels=5, **common)
    rated = run_replications("branin", ratings=3, **common)
    assert isinstance(graded.config.answers, AnswerFormat) and graded.config.answers.levels == 5
    # the initial queries are the same; graded answers that take a side take the binary one
    init = slice(0, 4)
    assert torch.equal(graded.queries[:, init], binary.queries[:, init])
    sided = graded.winners[:, init] >= 0
    assert torch.equal(graded.winners[:, init][sided], binary.winners[:, init][sided])
    assert torch.equal(rated.winners[:, init], binary.winners[:, init])
    assert rated.config.answers.ratings == 3


def test_replications_with_graded_answers_need_the_sequential_back_end():
    with pytest.raises(ValueError, match="sequential"):
        run_replications("branin", n_replications=1, n_queries=1, answers="graded")
    with pytest.raises(ValueError, match="tie_band"):
        run_replications(
            "branin", n_replications=1, n_queries=1, answers="graded", tie_band=0.5,
            backend="sequential",
        )  # fmt: skip


def test_grades_calibrated_on_top_design_pairs_tell_good_designs_apart():
    from botorch_pref.graded_users import calibrate_grades
    from botorch_pref.users import top_pair_gaps

    f = get_utility("branin")
    top = calibrate_grades(f, 5, n_pairs=2000, among="top")
    wide = calibrate_grades(f, 5, n_pairs=2000)
    gaps = top_pair_gaps(f, 2000, 0)
    assert torch.equal(top, torch.quantile(gaps, torch.tensor([1 / 3, 2 / 3], dtype=gaps.dtype)))
    assert bool((top > 0).all()) and bool(top[1] > top[0]) and bool((top < wide / 10).all())
    with pytest.raises(ValueError, match="among"):
        calibrate_grades(f, 5, among="best")


def test_an_answer_takes_only_its_parts_as_keywords():
    opt = _opt(answers="graded")
    query = opt.ask()
    for extra in ({"pair_ties_only": False}, {"skip": True}, {"levels": 3}):
        with pytest.raises(TypeError, match=next(iter(extra))):
            opt.add_comparison(query, 0, **extra)
    assert opt.n_queries == 0
    opt.add_comparison(query, 0, strength=1)
    assert opt.n_queries == 1
