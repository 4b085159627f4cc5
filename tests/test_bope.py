"""BoTorch's BOPE flow with PairwiseLaplaceGP as the utility model, side by side with PairwiseGP.

The flow (:func:`botorch_pref.integrations.bope.run_bope`) follows BoTorch's ``bope`` tutorial:
a multi-output ``SingleTaskGP`` outcome model, the preference model as a utility over outcome
vectors, EUBO with ``outcome_model=FixedSingleSampleModel(...)`` for preference exploration and
``LearnedObjective(pref_model=...)`` with qNEI then qLogNEI for experimentation. Both preference
models run on the same seed from the same fitted initial outcome model.
"""

from __future__ import annotations

from copy import deepcopy

import pytest
import torch
from botorch.models import PairwiseGP
from botorch.test_functions.multi_objective import DTLZ2

from botorch_pref import PairwiseLaplaceGP
from botorch_pref.integrations.bope import (
    fit_outcome_model,
    fit_preference_model,
    initial_designs,
    run_bope,
)

PROBLEM = DTLZ2(dim=3, num_objectives=2)
SETTINGS = {"n_initial": 6, "n_pe": 3, "raw_samples": 32, "num_restarts": 2, "mc_samples": 8}
# Noiseless answers; utilities of this problem span about 2 units over the unit cube. "No worse"
# allows this much slack for ties broken differently by two equally good models.
SLACK = 0.05


def utility(Y: torch.Tensor) -> torch.Tensor:
    """The tutorial's utility: minus the L1 distance of the outcome vector to (0.5, 0.5)."""
    return -(Y - 0.5).abs().sum(-1)


# Seed 1 is left out: there PairwiseGP's PE stage took 400 s on this machine (our model 2 s).
@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 2])
def test_bope_flow_runs_every_stage_and_matches_pairwise_gp(seed):
    X, Y = initial_designs(PROBLEM, 3, SETTINGS["n_initial"], seed)
    outcome_model = fit_outcome_model(X, Y)
    results = {
        cls: run_bope(
            PROBLEM, utility, 3, cls, seed=seed, outcome_model=deepcopy(outcome_model), **SETTINGS
        )
        for cls in (PairwiseGP, PairwiseLaplaceGP)
    }
    ours, ref = results[PairwiseLaplaceGP], results[PairwiseGP]
    for result in (ours, ref):
        # every stage ran: 2 initial pairs + one EUBO pair per PE iteration; qNEI and qLogNEI
        assert result.comparisons.shape == (2 + SETTINGS["n_pe"], 2)
        assert result.pe_Y.shape == (2 * (2 + SETTINGS["n_pe"]), 2)
        assert result.X.shape == (SETTINGS["n_initial"] + 2, 3)
        assert len(result.best_utility) == 3 and len(result.pe_utility) == SETTINGS["n_pe"]
    assert isinstance(ours.pref_model, PairwiseLaplaceGP)
    # the same initial experiments, then utilities no worse than PairwiseGP's
    torch.testing.assert_close(ours.X[: SETTINGS["n_initial"]], ref.X[: SETTINGS["n_initial"]])
    assert ours.pe_utility[-1] >= ref.pe_utility[-1] - SLACK
    assert ours.best_utility[-1] >= ref.best_utility[-1] - SLACK
    assert ours.recommended_utility >= ref.recommended_utility - SLACK


def test_preference_model_over_outcome_vectors_ranks_like_pairwise_gp():
    """Fitted on the same outcome-vector comparisons, both models rank held-out outcome
    vectors alike (Kendall-style pair agreement), and ours agrees with the true utility."""
    gen = torch.Generator().manual_seed(3)
    Y = torch.rand(16, 2, dtype=torch.float64, generator=gen) * 1.5
    i = torch.randint(16, (30,), generator=gen)
    j = (i + torch.randint(1, 16, (30,), generator=gen)) % 16
    u = utility(Y)
    C = torch.stack([torch.where(u[i] > u[j], i, j), torch.where(u[i] > u[j], j, i)], -1)
    ours = fit_preference_model(Y, C, PairwiseLaplaceGP)
    ref = fit_preference_model(Y, C, PairwiseGP)
    Yt = torch.rand(40, 2, dtype=torch.float64, generator=gen) * 1.5
    with torch.no_grad():
        mo, mr = ours.posterior(Yt).mean.squeeze(-1), ref.posterior(Yt).mean.squeeze(-1)
    truth = utility(Yt)

    def agreement(a: torch.Tensor, b: torch.Tensor) -> float:
        sa, sb = torch.sign(a[:, None] - a[None]), torch.sign(b[:, None] - b[None])
        return float((sa == sb).double().mean())

    assert agreement(mo, truth) >= agreement(mr, truth) - 0.02
    assert agreement(mo, mr) > 0.85


def test_run_bope_rejects_bad_settings():
    with pytest.raises(ValueError, match="experiment_acqfs"):
        run_bope(PROBLEM, utility, 3, experiment_acqfs=("qEI",))
    with pytest.raises(ValueError, match="n_initial"):
        run_bope(PROBLEM, utility, 3, n_initial=1)
    with pytest.raises(TypeError, match="model_cls"):
        fit_preference_model(torch.rand(3, 2).double(), torch.tensor([[0, 1]]), torch.nn.Module)
    with pytest.raises(TypeError, match="model_cls must be a class"):
        fit_preference_model(torch.rand(3, 2).double(), torch.tensor([[0, 1]]), "PairwiseGP")


def test_preference_model_accepts_subclasses():
    class MyGP(PairwiseLaplaceGP):
        pass

    Y, C = torch.rand(4, 2, dtype=torch.float64), torch.tensor([[0, 1], [2, 3]])
    assert type(fit_preference_model(Y, C, MyGP)) is MyGP


def test_run_bope_names_a_bare_string_or_a_fractional_count():
    # A bare string used to be split into characters ("experiment_acqfs must be among ...:
    # {'q', 'N', ...}"), and a fractional n_initial failed deep inside the Sobol draw.
    with pytest.raises(
        TypeError, match=r"experiment_acqfs must be a sequence of names.*\('qNEI',\)"
    ):
        run_bope(PROBLEM, utility, 3, experiment_acqfs="qNEI")
    for name, value in [
        ("n_initial", 8.5),
        ("n_initial_pairs", 1.5),
        ("n_pe", 2.5),
        ("n_pe", True),
    ]:
        with pytest.raises(ValueError, match=f"{name} must be .*integer.*, got {value!r}"):
            run_bope(PROBLEM, utility, 3, **{name: value})
