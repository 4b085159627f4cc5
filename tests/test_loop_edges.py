"""Edge cases of the loop's public API: resuming with a misfit fit, float32 bounds, the
recommendation anywhere, and the reading of replication results."""

from __future__ import annotations

import pytest
import torch

from botorch_pref import PreferenceOptimizer
from botorch_pref.loop import Hyperparameters, ReplicationResults

DT = torch.float64
UNIT = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=DT)
SETTINGS = {"strategy": "random", "n_initial": 2, "seed": 0}


def _answer(X: torch.Tensor) -> int:
    """The option nearest to (0.3, 0.3)."""
    return int((X - 0.3).square().sum(-1).argmin())


def _run(n: int) -> PreferenceOptimizer:
    opt = PreferenceOptimizer(UNIT, **SETTINGS)
    for _ in range(n):
        X = opt.ask()
        opt.tell(X, _answer(X))
    return opt


def _other_dimension(h: Hyperparameters) -> Hyperparameters:
    """``h`` with the lengthscales of a three-dimensional run."""
    values = dict(h.values)
    name = next(k for k in values if k.endswith("raw_lengthscale"))
    values[name] = torch.zeros(1, 3, dtype=DT)
    return Hyperparameters(values, h.n_answers)


def _params(opt: PreferenceOptimizer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in opt.model.named_parameters()}


def test_sync_with_a_misfit_fit_records_nothing_and_a_retry_fits_as_the_run():
    run = _run(4)
    wrong = _other_dimension(run.hyperparameters)
    opt = PreferenceOptimizer(UNIT, **SETTINGS)
    with pytest.raises(ValueError, match="do not fit"):
        opt.sync(run.history, hyperparameters=wrong)
    # nothing recorded: no answers left in a model that was never fitted
    assert opt.n_queries == 0 and opt.model is None and opt.hyperparameters is None
    assert opt.sync(run.history) == 4 and opt.n_refits == run.n_refits
    for name, value in _params(run).items():
        assert torch.equal(_params(opt)[name], value), name


def test_sync_with_a_misfit_fit_leaves_a_started_run_as_it_was():
    run = _run(4)
    opt = PreferenceOptimizer(UNIT, **SETTINGS)
    opt.sync(run.history[:2])
    pending, params, refits = opt.ask(), _params(opt), opt.n_refits
    with pytest.raises(ValueError, match="do not fit"):
        opt.sync(run.history, hyperparameters=_other_dimension(run.hyperparameters))
    assert opt.n_queries == 2 and opt.n_refits == refits
    assert torch.equal(opt.pending, pending)
    assert all(torch.equal(_params(opt)[k], v) for k, v in params.items())
    assert opt.sync(run.history) == 2 and opt.n_refits == run.n_refits


# float32 bounds whose upper end is not float32(lower + float32(upper - lower)): the unit
# cube's upper face maps one rounding step above it.
BOUNDS32 = torch.tensor([[-3.0, -3.0], [0.2, 0.2]], dtype=torch.float32)


def test_float32_designs_on_the_upper_face_are_inside_the_bounds():
    opt = PreferenceOptimizer(BOUNDS32, dtype=torch.float32, seed=0)
    corner = opt.from_unit(torch.tensor([[1.0, 1.0], [0.5, 0.5]]))
    opt.add_comparison(corner, 0)
    assert torch.equal(opt.datapoints, corner)


def test_float32_tell_takes_every_query_ask_returns():
    opt = PreferenceOptimizer(BOUNDS32, dtype=torch.float32, n_initial=2, seed=0)
    for _ in range(4):  # the third query puts an option on the upper face
        X = opt.ask()
        opt.tell(X, int(X.sum(-1).argmax()))
    assert opt.n_queries == 4


def test_best_anywhere_at_a_compared_design_returns_that_design_exactly():
    # 0.2 is not -2 + (0.2 - -2) in float64: the unit cube's 1 maps back one step off it
    opt = PreferenceOptimizer(torch.tensor([[-2.0], [0.2]], dtype=DT), seed=0)
    opt.add_comparison([[0.2], [-2.0]], 0)
    opt.add_comparison([[0.2], [-0.9]], 0)
    opt.add_comparison([[-0.9], [-2.0]], 0)
    rec = opt.best(among="anywhere")
    assert rec.index == 0
    assert torch.equal(rec.x, opt.datapoints[0])
    opt.add_comparison(torch.stack([rec.x, opt.datapoints[1]]), 0)
    assert opt.datapoints.shape[0] == 3  # the recommendation is the compared design


def _results(n_initial: int = 2, T: int = 4) -> ReplicationResults:
    regret = torch.tensor([[10.0**-i for i in range(T)]])
    return ReplicationResults(
        problem="p",
        strategy="random",
        q=2,
        answers="pairs",
        n_initial=n_initial,
        seeds=[0],
        regret=regret,
        regret_compared=regret,
        best_x=torch.zeros(1, T, 1),
        queries=torch.zeros(1, T, 2, 1),
        winners=torch.zeros(1, T, dtype=torch.long),
        seconds=torch.zeros(T),
    )


@pytest.mark.parametrize("k", [-1, -2, 1.5, True])
def test_log_regret_after_takes_a_count_of_acquisition_queries_only(k):
    res = _results()
    assert float(res.log_regret_after(2)) == -3.0 and float(res.log_regret_after(0)) == -1.0
    with pytest.raises(ValueError, match="k"):
        res.log_regret_after(k)
