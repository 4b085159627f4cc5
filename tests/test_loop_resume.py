"""Resuming a run from its answers and stored hyperparameters (PreferenceOptimizer.sync)."""

from __future__ import annotations

import json

import pytest
import torch

from botorch_pref import PreferenceOptimizer
from botorch_pref.loop import Hyperparameters, InvalidAnswerError, LoopState
from botorch_pref.test_functions import get_utility
from botorch_pref.users import SimulatedUser

BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
SETTINGS = {"strategy": "eubo", "n_initial": 3, "refit_all_until": 6, "refit_every": 4}


def _run(n: int, seed: int = 0, **settings) -> PreferenceOptimizer:
    user = SimulatedUser(get_utility("branin"), noise="probit", scale=0.1, seed=seed)
    opt = PreferenceOptimizer(BOUNDS, seed=seed, **{**SETTINGS, **settings})
    for _ in range(n):
        X = opt.ask()
        opt.tell(X, int(user.choose(X)))
    return opt


def _values(opt: PreferenceOptimizer) -> dict[str, torch.Tensor]:
    return {k: v.detach() for k, v in opt.model.named_parameters()}


@pytest.mark.parametrize("n", [9, 10])  # last fit at 8 answers: one or two answers after it
def test_resume_with_stored_hyperparameters_needs_no_fit_and_asks_the_same(n):
    run = _run(n)
    stored = Hyperparameters.from_dict(json.loads(json.dumps(run.hyperparameters.to_dict())))
    assert stored.n_answers == 8
    again = PreferenceOptimizer(BOUNDS, seed=0, **SETTINGS)
    added = again.sync(run.history, hyperparameters=stored)
    assert added == n and again.n_refits == 0  # no fit, though the schedule had seven
    for name, value in _values(run).items():
        torch.testing.assert_close(_values(again)[name], value, rtol=0, atol=1e-12)
    torch.testing.assert_close(again.ask(), run.ask(), rtol=0, atol=1e-6)
    assert again.best().index == run.best().index


def test_sync_adds_only_new_records_and_rebuilds_after_a_change():
    run = _run(5)
    opt = PreferenceOptimizer(BOUNDS, seed=0, **SETTINGS)
    assert opt.sync(run.history[:3]) == 3
    fits = opt.n_refits
    assert opt.sync(run.history) == 2 and opt.n_refits == fits + 2
    torch.testing.assert_close(opt.ask(), run.ask())
    changed = run.history[:4]
    changed[2] = changed[2]._replace(winner=1 - changed[2].winner)
    assert opt.sync(changed) == 4  # not a prefix: rebuilt from the first record
    assert opt.n_queries == 4 and opt.history[2].winner == changed[2].winner


def test_sync_keeps_the_pending_query_only_while_the_answers_stay_the_same():
    run = _run(5)
    opt = PreferenceOptimizer(BOUNDS, seed=0, **SETTINGS)
    opt.sync(run.history[:4])
    pending = opt.ask()
    assert opt.sync(run.history[:4]) == 0 and torch.equal(opt.pending, pending)
    assert opt.sync(run.history) == 1 and opt.pending is None  # answered elsewhere
    opt.ask()
    assert opt.sync(run.history[:3]) == 3 and opt.pending is None  # rebuilt: a new query
    pending = opt.ask()
    torch.testing.assert_close(pending, run.history[3].query)  # the run's fourth query
    with pytest.raises(InvalidAnswerError):
        opt.sync([*run.history[:3], (run.history[3].query, 7)])  # nothing added
    assert torch.equal(opt.pending, pending)


def test_the_core_replays_answers_for_one_member_only():
    run = _run(4)
    state = LoopState.build(BOUNDS, "eubo", n_initial=3, seeds=[0, 1])
    for call in (lambda: state.sync(run.history), state.history):
        with pytest.raises(ValueError, match="one-member state, this one has 2"):
            call()
    assert state.n_answers == 0


def test_hyperparameters_that_do_not_fit_are_rejected():
    run = _run(4)
    h = run.hyperparameters
    wrong = Hyperparameters({"not.a.parameter": torch.zeros(1)}, h.n_answers)
    with pytest.raises(ValueError, match="do not fit"):
        PreferenceOptimizer(BOUNDS, seed=0, **SETTINGS).sync(run.history, hyperparameters=wrong)
    with pytest.raises(ValueError, match="not a stored set"):
        Hyperparameters.from_dict({"values": {}})
    with pytest.raises(ValueError, match="finite"):
        Hyperparameters.from_dict(
            {"n_answers": 2, "values": {"a": {"shape": [1], "data": [float("nan")]}}}
        )
    assert PreferenceOptimizer(BOUNDS, seed=0).hyperparameters is None


def test_a_bad_record_is_an_invalid_answer():
    run = _run(2)
    opt = PreferenceOptimizer(BOUNDS, seed=0, **SETTINGS)
    with pytest.raises(InvalidAnswerError, match="record 1"):
        opt.sync([run.history[0], "nonsense"])
    with pytest.raises(InvalidAnswerError, match="winner must lie"):
        opt.sync([(run.history[0].query, 5)])
    assert issubclass(InvalidAnswerError, ValueError)


def test_a_bad_record_while_fits_are_skipped_leaves_the_model_with_the_kept_answers():
    run = _run(9)
    records = list(run.history)
    records[4] = (records[4].query, 7)  # out of range: records 1-4 are kept
    opt = PreferenceOptimizer(BOUNDS, seed=0, **SETTINGS)
    with pytest.raises(InvalidAnswerError, match="winner must lie"):
        opt.sync(records, hyperparameters=run.hyperparameters)
    assert opt.n_queries == 4
    assert opt.model.datapoints.shape[-2] == opt.datapoints.shape[0]
    assert opt.sync(run.history) == 5 and opt.n_queries == 9  # the rest goes on from there
